"""Forward lines in eval mode inside a training loop: do their graphs die there?

`G.eval(); samples.append(G(fixed_z)); G.train()` inside an epoch loop keeps every
sample's graph for the whole run. Such a run of lines may be wrapped in
`torch.no_grad()` only when nothing the lines make reaches a gradient use, in this
iteration or a later one (`result_flow` follows the loop), and the inputs of their
forwards are not themselves meant for gradients (`x.requires_grad_()`, `x.grad`: a
saliency map or an adversarial example needs the graph back to the input).
"""

from __future__ import annotations

from typing import Callable, Sequence

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.names import last_segment
from autograd_fix.codemods.semantic.autograd_function import rebound_names
from autograd_fix.codemods.semantic.dataflow import REACHES_SINK, RETURNED, result_flow
from autograd_fix.codemods.torch_api import PYTHON_VALUE_MODULES
from autograd_fix.codemods.walk import SyntaxIndex, iter_descendants


def local_bindings(function: cst.FunctionDef) -> set[str]:
    """The names `function` binds itself (parameters, assignments, loops, `with ... as`)."""
    params = function.params
    names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    names |= {star.name.value for star in (params.star_arg, params.star_kwarg) if isinstance(star, cst.Param)}
    return names | rebound_names([function.body])


def _input_names(call: cst.Call) -> set[str]:
    return {name for arg in call.args if (name := dotted_name(arg.value)) is not None}


def _wants_input_gradients(function: cst.FunctionDef, inputs: set[str]) -> bool:
    """Whether the function asks for gradients of one of `inputs`: `x.requires_grad_()`,
    `x.requires_grad = True`, or a read of `x.grad`."""
    for node in iter_descendants(function.body):
        if isinstance(node, cst.Attribute) and node.attr.value in ("requires_grad_", "requires_grad", "grad"):
            if dotted_name(node.value) in inputs:
                return True
    return False


def graphs_die_in_lines(
    function: cst.FunctionDef,
    lines: Sequence[cst.CSTNode],
    is_forward: Callable[[cst.Call], bool],
    sink: Callable[[cst.CSTNode], bool],
    syntax: SyntaxIndex,
    returned_to_training: bool,
) -> bool:
    """True when no forward of `lines` (a call `is_forward` accepts) makes a value that
    reaches `sink` (a gradient use) later, none is returned to a caller that trains
    (`returned_to_training`), and none takes inputs the function wants gradients of."""
    inputs: set[str] = set()
    for line in lines:
        for call in iter_descendants(line):
            if not isinstance(call, cst.Call) or not is_forward(call):
                continue
            flow = result_flow(function, call, sink, syntax)
            if flow == REACHES_SINK or (flow == RETURNED and returned_to_training):
                return False
            inputs |= _input_names(call)
    return not (inputs and _wants_input_gradients(function, inputs))


def may_return_tensor(function: cst.FunctionDef, imports: ImportIndex | None = None) -> bool:
    """Does some `return` hand back something that may be a tensor with a graph?

    Literals, None, and values ending in `.item()` / `float(...)` and the like do not, nor
    (given the file's `imports`) a call of Python's own `random` or `math` modules.
    """
    for node in iter_descendants(function.body, prune=lambda n: isinstance(n, (cst.FunctionDef, cst.Lambda))):
        if isinstance(node, cst.Return) and node.value is not None:
            value = node.value
            if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString)) or (
                isinstance(value, cst.Name) and value.value in {"None", "True", "False"}
            ):
                continue
            if isinstance(value, cst.Call) and last_segment(value.func) in TO_PYTHON:
                continue
            qualified = imports.qualified_name(value.func) if imports is not None and isinstance(value, cst.Call) else None
            if qualified is not None and qualified.split(".", 1)[0] in PYTHON_VALUE_MODULES:
                continue  # `random.randint(0, 1)`: an epsilon-greedy action
            return True
        if isinstance(node, cst.Yield):
            return True
    return False


#: calls whose result is a Python value, not a tensor that could carry a graph
TO_PYTHON = frozenset({"item", "tolist", "numpy", "float", "int", "bool", "len", "str", "round"})
