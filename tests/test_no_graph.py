"""Unit tests for `codemods/semantic/no_graph.py`: which values certainly carry no graph."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.semantic.model import SemanticModel


def _ask(source: str, name: str, function: str | None = "step", trusted: frozenset[str] = frozenset()) -> bool:
    module = cst.parse_module(textwrap.dedent(source))
    semantic = SemanticModel(module, ImportIndex.from_module(module))
    scope: cst.FunctionDef | cst.Module = module
    if function is not None:
        scope = next(node for node in semantic.call_graph.functions.values() if node.node.name.value == function).node
    return semantic.no_graph.name(name, scope, trusted)


DECODE = """
import torch

def _mask(seq):
    mask = torch.BoolTensor([[True]])
    return seq.data.masked_fill_(mask, 0)

def step(model, x):
    prev = None
    for i in range(2):
        out = model(x, prev)
        prev = {CARRIED}
        prev = _mask(prev)
"""


@pytest.mark.parametrize(
    ("carried", "expected"),
    [
        ("torch.squeeze(torch.topk(out, 1, dim=2)[1]).view(-1, out.size(1))", True),
        ("out.topk(1, dim=2).indices", True),
        ("out.argmax(dim=-1)", True),
        ("out.max(2)[1]", True),
        ("out.detach().clone()", True),
        ("torch.topk(out, 1, dim=2)[0]", False),  # the values, not the indices
        ("torch.max(out, x)[1]", False),  # elementwise maximum, indexed: a graph
        ("out.max()[1]", False),
        ("out.softmax(dim=-1)", False),
        ("out.sum(0) + out.argmax(0)", False),
    ],
)
def test_carried_value_through_helper(carried: str, expected: bool) -> None:
    assert _ask(DECODE.replace("{CARRIED}", carried), "prev") is expected


def test_helper_returning_its_argument_is_as_free_as_every_call_makes_it() -> None:
    source = DECODE.replace("seq.data.masked_fill_(mask, 0)", "seq.masked_fill(mask, 0)")
    assert _ask(source.replace("{CARRIED}", "out.argmax(-1)"), "prev")  # its only caller passes indices
    source += "\nsmoothed = _mask(model(torch.ones(1)))\n"
    assert not _ask(source.replace("{CARRIED}", "out.argmax(-1)"), "prev")


def test_masked_fill_value_argument_counts() -> None:
    source = DECODE.replace("seq.data.masked_fill_(mask, 0)", "seq.data.masked_fill_(mask, out_scale)")
    source += "\nout_scale = model(torch.ones(1)).sum()\n"
    assert not _ask(source.replace("{CARRIED}", "out.argmax(-1)"), "prev")


CALLERS = """
import torch

def step(model, x, ratio):
    return model(x) * ratio

def train(model, loader, ratio):
    for x in loader:
        step(model, x, {PASSED})

train(model, loader, ratio=0.5)
"""


@pytest.mark.parametrize(
    ("passed", "expected"),
    [
        ("ratio", True),  # the caller's own parameter, a literal at its only call
        ("0.25", True),
        ("ratio * 2", True),
        ("model(x).mean()", False),
        ("x", False),  # a batch, trusted by nobody here
    ],
)
def test_parameter_by_every_call(passed: str, expected: bool) -> None:
    assert _ask(CALLERS.replace("{PASSED}", passed), "ratio") is expected


def test_parameter_without_calls_or_passed_as_callback() -> None:
    assert not _ask("def step(model, ratio):\n    return model(ratio)\n", "ratio")
    source = CALLERS.replace("{PASSED}", "0.5") + "\nrunner.register(step)\n"
    assert not _ask(source, "ratio")


def test_parameter_through_star_args_is_unknown() -> None:
    source = CALLERS.replace("step(model, x, {PASSED})", "step(*args)")
    assert not _ask(source, "ratio")
    # a starred argument shifts what follows it: `ratio` may be the graph-carrying mean
    source = CALLERS.replace("step(model, x, {PASSED})", "step(*pair, model(x).mean(), 0.5)")
    assert not _ask(source, "ratio")


def test_module_globals() -> None:
    source = """
import torch

vocab = 20
weight = model(torch.ones(1)).sum()
counter = 0

def step(x):
    global counter
    counter = x
    return x.view(-1, vocab) * weight
"""
    assert _ask(source, "vocab")
    assert not _ask(source, "weight")
    assert not _ask(source, "counter")  # rebound from a function


def test_containers_and_loop_targets_are_unknown() -> None:
    source = """
def step(model, loader):
    outs = []
    for x in loader:
        outs.append(model(x))
    return outs
"""
    assert not _ask(source, "outs")
    assert not _ask(source, "x")
    assert _ask(source, "x", trusted=frozenset({"x"}))


def test_cycle_is_confirmed_by_the_other_bindings() -> None:
    source = """
def step(model, x):
    idx = x.argmax(-1)
    for i in range(3):
        idx = idx.view(-1)
        x2 = model(idx)
    best = x.argmax(-1)
    for i in range(3):
        best = best + model(best).sum()
"""
    assert _ask(source, "idx")
    assert not _ask(source, "best")


def test_pair_unpacked_from_topk() -> None:
    source = """
import torch

def step(out):
    values, indices = torch.topk(out, 3)
    a, b = out.argmax(0), out.sum()
"""
    assert _ask(source, "indices")
    assert not _ask(source, "values")
    assert _ask(source, "a")
    assert not _ask(source, "b")


def test_parameter_of_a_method_also_called_on_other_objects_is_unknown() -> None:
    source = """
class Trainer:
    def step(self, ratio):
        return ratio

    def fit(self):
        self.step(0.5)

def run(other):
    other.step(other.weight())
"""
    assert _ask(source.replace("other.step(other.weight())", "pass"), "ratio")
    assert not _ask(source, "ratio")


def test_a_local_shadowing_a_helper_is_not_the_helper() -> None:
    source = """
def clip(seq):
    return seq.data

def step(model, x, clip):
    out = clip(model(x))
"""
    assert not _ask(source, "out")
    assert _ask(source.replace(", clip)", ")"), "out")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("pass", True),
        ("prev.add_(out)", False),
        ("prev[0] = out.sum()", False),
        ("view = prev.view(-1)\n        view.copy_(out.flatten())", False),  # through a view
        ("torch.add(prev, out, out=prev)", False),
        ("prev.requires_grad_()", False),
        ("prev.masked_fill_(prev > 3, 0)", True),  # a constant written in place
        ("prev.data.add_(out)", True),  # the detached alias changes, not prev's history
    ],
)
def test_in_place_changes(change: str, expected: bool) -> None:
    source = f"""
import torch

def step(model, x):
    prev = torch.zeros(4)
    for i in range(2):
        out = model(x, prev)
        {change}
"""
    assert _ask(source, "prev") is expected
