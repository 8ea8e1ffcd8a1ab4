"""Unit tests for `codemods/dataflow.py`: where a call's result goes, what runs before a statement."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from autograd_fix.codemods.semantic.dataflow import DROPPED, REACHES_SINK, RETURNED, may_run_before, result_flow
from autograd_fix.codemods.walk import iter_descendants


def _backward_is_sink(statement: cst.CSTNode) -> bool:
    return any(
        isinstance(node, cst.Attribute) and node.attr.value in {"backward", "step"} for node in iter_descendants(statement)
    )


def _flow_of(source: str, callee: str) -> str:
    module = cst.parse_module(textwrap.dedent(source))
    function = next(node for node in module.body if isinstance(node, cst.FunctionDef))
    call = next(
        node
        for node in iter_descendants(function)
        if isinstance(node, cst.Call) and module.code_for_node(node.func) == callee
    )
    return result_flow(function, call, _backward_is_sink)


FIT = """
def fit(self, train_loader, val_loader):
    for batch in train_loader:
        loss = self.training_step(batch)
        loss.backward()
        self.optimizer.step()
    val_losses = [self.validation_step(batch) for batch in val_loader]
    self.history.append(sum(val_losses))
    print(val_losses)
"""


def test_a_result_that_is_backpropagated_reaches_the_sink() -> None:
    assert _flow_of(FIT, "self.training_step") == REACHES_SINK


def test_a_logged_result_is_dropped_even_when_the_caller_trains() -> None:
    assert _flow_of(FIT, "self.validation_step") == DROPPED


def test_through_self_attributes_and_the_next_iteration() -> None:
    source = """
    def fit(self, loader):
        for batch in loader:
            self.total.backward()
            self.total = self.total + self.step(batch)
    """
    assert _flow_of(source, "self.step") == REACHES_SINK


def test_handed_back_to_the_caller() -> None:
    source = """
    def run(self, batch):
        out = self.predict(batch)
        scores = out.softmax(-1)
        return scores
    """
    assert _flow_of(source, "self.predict") == RETURNED


def test_a_call_in_an_if_header_that_only_decides_is_dropped() -> None:
    """Issue 18 (F3): the caller's use of the result decides, wherever the call sits."""
    source = """
    def fit(self, loader):
        for batch in loader:
            self.loss(batch).backward()
            self.optimizer.step()
        if self.validate(loader) < 0.1:
            print("done")
    """
    assert _flow_of(source, "self.validate") == DROPPED


@pytest.mark.parametrize(
    ("source", "callee", "flow"),
    [
        ("""
    def fit(self, batches):
        for out in self.predict(batches):
            out.sum().backward()
    """, "self.predict", REACHES_SINK),
        ("""
    def fit(self, batches):
        while self.validate(batches) > 0.5:
            self.optimizer.step()
    """, "self.validate", DROPPED),
        ("""
    def fit(self, x):
        with self.forward_ctx(x) as out:
            out.mean().backward()
    """, "self.forward_ctx", REACHES_SINK),
        ("""
    def best(self, x):
        if (score := self.score(x)) > 0:
            return score
    """, "self.score", RETURNED),
    ],
    ids=["for-iter-to-backward", "while-test", "with-item-to-backward", "walrus-returned"],
)
def test_a_call_in_a_header_is_followed_like_a_statement(source: str, callee: str, flow: str) -> None:
    assert _flow_of(source, callee) == flow


SCRIPT = """
import torch
model = Net()
if pretrained:
    model.embed.weight.data.copy_(vectors)
else:
    loss = model(x).sum()
    loss.backward()
for epoch in range(3):
    model.fc.weight.data.clamp_(0)
    model(x).sum().backward()
"""


@pytest.mark.parametrize(
    ("statement", "backward_before"),
    [("model.embed.weight.data.copy_(vectors)", False), ("model.fc.weight.data.clamp_(0)", True)],
)
def test_what_may_run_before_a_module_level_statement(statement: str, backward_before: bool) -> None:
    module = cst.parse_module(SCRIPT)
    target = next(
        node
        for node in iter_descendants(module)
        if isinstance(node, cst.SimpleStatementLine) and module.code_for_node(node).strip() == statement
    )
    before = may_run_before(module.body, target)
    assert any(_backward_is_sink(node) for node in before) is backward_before
