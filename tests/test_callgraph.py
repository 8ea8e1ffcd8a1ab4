"""Unit tests for `codemods/semantic/callgraph.py`: same-file calls, callbacks, grad use,
and functions that return a graph-carrying value."""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.names import last_segment
from autograd_fix.codemods.semantic.callgraph import CallGraph, FunctionFacts, GraphReturns


def _graph(source: str) -> CallGraph:
    module = cst.parse_module(textwrap.dedent(source))
    return CallGraph.build(module, ImportIndex.from_module(module))


def _function(graph: CallGraph, name: str) -> FunctionFacts:
    return next(f for f in graph.functions.values() if f.node.name.value == name)


def _model_calls(function: FunctionFacts):
    return lambda call: last_segment(call.func) == "model"


TRAINER = """
import torch

class Trainer:
    def _forward(self, batch):
        return {"energy": self.model(batch)}

    def _outputs(self, batch):
        return self._forward(batch)

    @torch.no_grad()
    def _predict(self, batch):
        return self.model(batch)

    def _score(self, batch):
        return self.model(batch).argmax(-1)

    def validate(self, loader):
        return [self._outputs(b)["energy"].item() for b in loader]
"""


def test_graph_carrying_returns_follow_same_file_calls() -> None:
    graph = _graph(TRAINER)
    returns = GraphReturns(graph, _model_calls)
    assert returns.returns_graph(_function(graph, "_forward"))
    assert returns.returns_graph(_function(graph, "_outputs"))  # through `_forward`
    assert not returns.returns_graph(_function(graph, "_predict"))  # decorated no_grad
    assert not returns.returns_graph(_function(graph, "_score"))  # cut by argmax
    assert not returns.returns_graph(_function(graph, "validate"))  # cut by .item()
    call = cst.parse_expression("self._outputs(batch)")
    assert isinstance(call, cst.Call) and returns.of_call(call, "Trainer")
    assert not returns.of_call(call, None)  # `self.` resolves only inside the class


def test_functions_passed_as_values_are_callbacks() -> None:
    graph = _graph(
        """
        def validation_step(batch):
            return batch

        def training_step(batch):
            return batch

        def run(step, loader):
            return [step(b) for b in loader]

        run(validation_step, [1])
        training_step(2)
        """
    )
    assert _function(graph, "validation_step").passed_as_callback
    assert not _function(graph, "training_step").passed_as_callback


def test_module_level_gradient_use() -> None:
    assert _graph("loss = model(x).sum()\nloss.backward()\n").module_level_uses_grad
    assert not _graph("def f(loss):\n    loss.backward()\nprint(f)\n").module_level_uses_grad
    # a script's top level that calls a same-file function that trains takes gradients too
    assert _graph("def step(loss):\n    loss.backward()\nstep(model(x).sum())\n").module_level_uses_grad


def test_parameter_arguments_pair_each_call_with_what_it_passes() -> None:
    graph = _graph(
        """
import torch

def normalize(img, mode="train", *, scale=1.0):
    return img

def unknown_keyword(img):
    return img

def quiet(img):
    return img

def step(gen, z):
    out = normalize(gen(z), "train")
    out = normalize(out, scale=0.5)
    unknown_keyword(img=out, extra=1)
    with torch.no_grad():
        quiet(gen(z))
    return out
"""
    )
    sites = graph.parameter_arguments(_function(graph, "normalize"))
    assert sites is not None
    assert [sorted(bound) for _, _, bound in sites] == [["img", "mode"], ["img", "scale"]]
    assert all(caller is not None and caller.node.name.value == "step" for caller, _, _ in sites)
    assert graph.parameter_arguments(_function(graph, "unknown_keyword")) is None
    assert graph.parameter_arguments(_function(graph, "quiet")) is None  # its only call runs under no_grad
    assert graph.parameter_arguments(_function(graph, "step")) is None  # no call site


def test_parameter_arguments_are_unknown_when_an_unresolved_call_may_run_the_function() -> None:
    graph = _graph(
        """
import helpers

def normalize(img):
    return img

def step(gen, z, other):
    out = normalize(gen(z))
    return other.normalize(out)
"""
    )
    assert graph.parameter_arguments(_function(graph, "normalize")) is None
