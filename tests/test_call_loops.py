"""Unit tests for `codemods/rules/agf002_missing_zero_grad/call_loops.py`: the caller loops that repeat a function."""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.rules.agf002_missing_zero_grad.call_loops import loops_around_calls
from autograd_fix.codemods.semantic.callgraph import CallGraph

SOURCE = textwrap.dedent(
    """
    class Recipe:
        def train_step(self, batch):
            self.optimizer.step()

        def eval_step(self, batch):
            pass

        def train(self):
            self.optimizer.zero_grad()
            while self.step < 10:
                batch = next(self.data)
                if batch:
                    self.train_step(batch)
            self.eval_step(None)
            for batch in self.data:
                self.eval_step(batch)

        def warmup(self):
            for batch in self.data:
                self.train_step(batch)

    def unused():
        pass
    """
)


def _graph() -> CallGraph:
    module = cst.parse_module(SOURCE)
    return CallGraph.build(module, ImportIndex.from_module(module))


def _function(graph: CallGraph, name: str):  # type: ignore[no-untyped-def]
    return next(f for f in graph.functions.values() if f.node.name.value == name)


def test_every_call_repeated_by_a_loop_gives_its_loops() -> None:
    graph = _graph()
    loops = loops_around_calls(_function(graph, "train_step"))
    assert loops is not None
    assert sorted(type(loop).__name__ for loop in loops) == ["For", "While"]


def test_a_straight_line_call_or_no_call_gives_none() -> None:
    graph = _graph()
    assert loops_around_calls(_function(graph, "eval_step")) is None
    assert loops_around_calls(_function(graph, "unused")) is None
