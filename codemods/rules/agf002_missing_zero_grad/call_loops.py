"""Which loops repeat a same-file function: the caller loops around each of its call sites.

A training step split into methods (`train` loops over batches and calls `train_step`,
which runs `forward_backward` and `optimizer.step()`) trains in the caller's loop though
no loop holds the backward or the step. Rules that reason about iterations (zeroing
between steps) follow the calls back to those loops.
"""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.semantic.callgraph import FunctionFacts
from autograd_fix.codemods.semantic.loops import innermost_loop, parent_map


def loops_around_calls(function: FunctionFacts) -> list[cst.For | cst.While] | None:
    """The innermost caller loop around every same-file call of `function`, one per call
    site; None when it has no call site, or one that no loop of a function repeats
    (module level, straight-line code): then nothing shows it runs once per iteration."""
    if not function.call_sites:
        return None
    loops: list[cst.For | cst.While] = []
    parents: dict[int, dict[int, cst.CSTNode]] = {}
    for caller, _, call in function.call_sites:
        if caller is None or caller is function:
            return None
        key = id(caller.node)
        if key not in parents:
            parents[key] = parent_map(caller.node)
        loop = innermost_loop(call, parents[key])
        if loop is None:
            return None
        loops.append(loop)
    return loops
