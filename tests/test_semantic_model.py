"""The per-file semantic model, asked directly (not through a rule's examples)."""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.rule import RuleContext
from autograd_fix.codemods.semantic.callgraph import CallGraph


def _graph(source: str) -> tuple[cst.Module, CallGraph]:
    module = cst.parse_module(textwrap.dedent(source))
    return module, CallGraph.build(module, ImportIndex.from_module(module))


def _function(module: cst.Module, graph: CallGraph, name: str, class_name: str | None = None):
    [facts] = graph.by_key[(class_name, name)]
    assert graph.facts(facts.node) is facts
    return facts


TRAINER = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)

class Trainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer

    def _step(self, batch):
        loss = self.model(batch).sum()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def training_epoch(self, loader):
        return [self._step(b) for b in loader]

    def score(self, batch):
        return self.model(batch).argmax(-1)

    def fit(self, loader, val):
        self.training_epoch(loader)
        with torch.no_grad():
            self.score(val)
        print(self.score(val))

def helper(model, x):
    return model(x)

def train(model, opt, x):
    loss = helper(model, x).sum()
    loss.backward()
    opt.step()
"""


def test_gradient_use_propagates_through_same_file_calls() -> None:
    module, graph = _graph(TRAINER)
    assert _function(module, graph, "_step", "Trainer").uses_grad
    # no backward of its own: it calls `self._step`, which takes gradients
    assert _function(module, graph, "training_epoch", "Trainer").uses_grad
    assert not _function(module, graph, "score", "Trainer").uses_grad


def test_self_calls_resolve_within_the_class_and_bare_names_at_module_level() -> None:
    module, graph = _graph(TRAINER)
    assert [f.node.name.value for f in graph.resolve("self._step", "Trainer")] == ["_step"]
    assert graph.resolve("self._step", None) == []
    assert [f.node.name.value for f in graph.resolve("helper", None)] == ["helper"]
    # an attribute call on another object is not resolved (unknown, not guessed)
    assert graph.resolve("trainer.fit", None) == []


def test_a_call_site_under_no_grad_is_seen_by_the_callee() -> None:
    module, graph = _graph(TRAINER)
    score = _function(module, graph, "score", "Trainer")
    assert score.called_under_no_grad
    assert {under for _, under, _ in score.call_sites} == {True, False}
    assert not _function(module, graph, "_step", "Trainer").called_under_no_grad


def test_a_result_that_reaches_backward_in_the_caller_marks_the_callee() -> None:
    module, graph = _graph(TRAINER)
    # train() backpropagates helper()'s result
    assert _function(module, graph, "helper").called_from_grad_scope
    # fit() trains (through training_epoch) but only prints score()'s result
    assert not _function(module, graph, "score", "Trainer").called_from_grad_scope


def test_no_grad_reaches_through_a_decorated_caller() -> None:
    module, graph = _graph(
        """
        import torch

        def predict(model, x):
            return model(x)

        @torch.inference_mode()
        def report(model, x):
            return predict(model, x).argmax()
        """
    )
    assert _function(module, graph, "predict").called_under_no_grad
    assert _function(module, graph, "report").decorated_no_grad


def test_the_model_is_built_once_per_file_and_shared() -> None:
    module = cst.parse_module(textwrap.dedent(TRAINER))
    context = RuleContext("train.py", module)
    assert context.semantic is context.semantic
    assert context.semantic.call_graph is context.semantic.call_graph
    assert context.semantic.tracking is context.semantic.tracking
    # a fresh file gets a fresh model
    other = RuleContext("train.py", cst.parse_module(textwrap.dedent(TRAINER)))
    assert other.semantic is not context.semantic
    assert other.semantic.call_graph is not context.semantic.call_graph


def test_custom_functions_and_their_apply_calls() -> None:
    module = cst.parse_module(
        textwrap.dedent(
            """
            import torch

            class Clamp(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x, lo, hi):
                    return x.clamp(lo, hi)

                @staticmethod
                def backward(ctx, g):
                    return g, None, None

            def clamp(x):
                return Clamp.apply(x, 0.0, 1.0)
            """
        )
    )
    semantic = RuleContext("ops.py", module).semantic
    assert [f.node.name.value for f in semantic.custom_functions] == ["Clamp"]
    assert "Clamp" in semantic.apply_calls


def test_callees_run_under_no_grad_are_one_answer_for_call_graph_and_tracking() -> None:
    module = cst.parse_module(
        textwrap.dedent(
            """
            import torch

            def evaluate(model, x):
                return model(x)

            def run_all(trainer, model, x):
                with torch.no_grad():
                    trainer.run(evaluate)
                    trainer.score(x)

            def train(model, x):
                return model(x).sum()
            """
        )
    )
    semantic = RuleContext("train.py", module).semantic
    # callees by last name, and every bare name handed to a call there (a callback may be one)
    assert {"run", "score", "evaluate", "x"} <= semantic.call_graph.no_grad_callees
    assert "train" not in semantic.call_graph.no_grad_callees
    assert semantic.tracking.no_grad_callees is semantic.call_graph.no_grad_callees
