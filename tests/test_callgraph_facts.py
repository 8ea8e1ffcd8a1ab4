"""Unit tests for `codemods/semantic/callgraph.py`: facts that travel through same-file calls (holding, attributes, returned values)."""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.semantic.callgraph import CallGraph, FunctionFacts


def _graph(source: str) -> tuple[cst.Module, CallGraph]:
    module = cst.parse_module(textwrap.dedent(source))
    return module, CallGraph.build(module, ImportIndex.from_module(module))


def _calls_zero_grad(function: FunctionFacts) -> bool:
    return any(name.endswith(".zero_grad") for name in function.calls)


def test_holding_follows_helpers_and_methods_transitively() -> None:
    _, graph = _graph(
        """
        def wipe(opt):
            opt.zero_grad()

        def housekeeping(opt):
            wipe(opt)

        class Trainer:
            def reset(self):
                housekeeping(self.optimizer)

            def train_step(self, batch):
                self.reset()
                self.model(batch).sum().backward()

        def clip(opt, c):
            for group in opt.param_groups:
                for p in group["params"]:
                    p.grad.clamp_(-c, c)
        """
    )
    names = {function.node.name.value for function in graph.holding(_calls_zero_grad)}
    assert names == {"wipe", "housekeeping", "reset", "train_step"}


def test_holding_counts_an_unresolved_call_by_its_name() -> None:
    _, graph = _graph(
        """
        class Helper:
            def clear(self, opt):
                opt.zero_grad()

        def fit(helper, opt):
            helper.clear(opt)

        def log(writer):
            writer.flush()
        """
    )
    names = {function.node.name.value for function in graph.holding(_calls_zero_grad)}
    assert names == {"clear", "fit"}


def test_assigned_attribute_and_the_functions_it_names() -> None:
    module, graph = _graph(
        """
        import types

        class Engine:
            def attach(self, optimizer):
                def dp_step(opt, closure=None):
                    opt.zero_grad()
                optimizer.step = types.MethodType(dp_step, optimizer)

        class Trainer:
            def __init__(self):
                self.step = 0
        """
    )
    values = graph.assigned_attribute(module, "step")
    assert [cst.Module([]).code_for_node(value) for value in values] == ["types.MethodType(dp_step, optimizer)", "0"]
    assert [function.node.name.value for function in graph.referenced_functions(values[0])] == ["dp_step"]
    assert graph.referenced_functions(values[1]) == []


def test_returned_values_of_a_function_that_always_returns() -> None:
    _, graph = _graph(
        """
        def init_params(size, std=1.0):
            return (torch.randn(size) * std).requires_grad_()

        def maybe(flag):
            if flag:
                return torch.ones(1)

        def gen(n):
            yield torch.zeros(n)
        """
    )
    values = graph.returned_values("init_params")
    assert values is not None and [cst.Module([]).code_for_node(v) for v in values] == ["(torch.randn(size) * std).requires_grad_()"]
    assert graph.returned_values("maybe") is None  # may fall off the end
    assert graph.returned_values("gen") is None
    assert graph.returned_values("elsewhere") is None
