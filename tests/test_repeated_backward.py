"""Unit tests for `codemods/rules/agf011_unneeded_retain_graph/repeated_backward.py`: the last backward of a graph
backpropagated several times, in straight-line code."""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.semantic.loops import all_nodes, enclosing_scope, is_gradient_call, parent_map
from autograd_fix.codemods.rules.agf011_unneeded_retain_graph.repeated_backward import earlier_roots, passed_on_after, retained_root


def _last_backward(source: str) -> tuple[list[str] | None, cst.Call, dict[int, cst.CSTNode]]:
    module = cst.parse_module(textwrap.dedent(source))
    imports = ImportIndex.from_module(module)
    parents = parent_map(module)
    calls = [c for c in all_nodes(module, cst.Call) if is_gradient_call(c, imports)]  # type: ignore[arg-type]
    last = calls[-1]
    scope = enclosing_scope(last, parents)
    in_scope = [c for c in all_nodes(scope, cst.Call) if is_gradient_call(c, imports)]  # type: ignore[arg-type]
    return earlier_roots(last, in_scope, parents, imports), last, parents  # type: ignore[arg-type]


LIGHTNING = """
class GAN(LightningModule):
    def training_step(self, batch, batch_idx):
        opt_a, opt_b = self.optimizers()
        loss_1 = self.loss(self(batch[0]))
        self.manual_backward(loss_1)
        opt_a.step()
        loss_2 = self.loss(self(batch[0]))
        self.manual_backward(loss_2, retain_graph=True)
        self.manual_backward(loss_2, retain_graph=True)
        opt_b.step()
"""


def test_lightning_repeated_manual_backward_gives_every_earlier_root() -> None:
    roots, last, _ = _last_backward(LIGHTNING)
    assert roots == ["loss_1", "loss_2"]
    root = retained_root(last)
    assert root is not None and root.value == "loss_2"


def test_earlier_backwards_of_other_graphs_only_are_not_a_repeated_graph() -> None:
    roots, _, _ = _last_backward(LIGHTNING.replace("        self.manual_backward(loss_2, retain_graph=True)\n", "", 1))
    assert roots is None  # loss_2 is backpropagated once: the usual single-backward questions apply


def test_a_loop_or_a_condition_around_the_calls_gives_none() -> None:
    looped = """
    def f(model, inputs):
        loss = model(inputs).sum()
        for _ in range(2):
            loss.backward(retain_graph=True)
            loss.backward(retain_graph=True)
    """
    conditional = """
    def f(model, inputs, again):
        loss = model(inputs).sum()
        if again:
            loss.backward(retain_graph=True)
        loss.backward(retain_graph=True)
    """
    assert _last_backward(looped)[0] is None
    assert _last_backward(conditional)[0] is None


def test_a_later_call_given_the_uncut_loss_passes_it_on() -> None:
    source = """
    def f(model, inputs):
        loss = model(inputs).sum()
        loss.backward(retain_graph=True)
        loss.backward(retain_graph=True)
        logged = {LATER}
    """
    _, last, parents = _last_backward(source.replace("{LATER}", "record(loss)"))
    assert passed_on_after(last, {"loss"}, parents)
    _, last, parents = _last_backward(source.replace("{LATER}", "record(loss.item())"))
    assert not passed_on_after(last, {"loss"}, parents)
