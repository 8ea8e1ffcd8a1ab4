"""Unit tests for `codemods/rules/agf011_unneeded_retain_graph/fresh_graph.py`: is a retained graph built fresh, used again?"""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.rules.agf011_unneeded_retain_graph.fresh_graph import FreshGraph, NameHints
from autograd_fix.codemods.semantic.model import SemanticModel
from autograd_fix.codemods.semantic.loops import all_nodes, enclosing_scope, parent_map

_HINTS = NameHints(
    is_data_iterable=lambda node: True,
    is_data_parameter=lambda name: name in {"batch"},
    is_state_name=lambda name: name == "hidden",
    is_state_call=lambda name: name == "repackage",
)


def _analysis(source: str) -> tuple[FreshGraph, list[cst.Call]]:
    module = cst.parse_module(textwrap.dedent(source))
    imports = ImportIndex.from_module(module)
    backwards = [c for c in all_nodes(module, cst.Call) if isinstance(c.func, cst.Attribute) and c.func.attr.value == "backward"]
    parents = parent_map(module)
    first = backwards[0]
    semantic = SemanticModel(module, imports)
    scope = enclosing_scope(first, parents)
    return FreshGraph(scope, first, parents, semantic.call_graph, imports, _HINTS, semantic.no_graph), backwards


TWO_UPDATES = """
import torch

for step, k in enumerate(range(3)):
    frames = torch.randn(2, 3)
    style = E(frames).mean(dim=0)
    fake = G(frames, style)
    loss = recon(fake, frames) + critic(D(fake))
    loss.backward(retain_graph=True)
    fake = {REFAKE}
    loss_D = critic(D(fake)) + critic(D(frames))
    loss_D.backward()
"""


def test_a_later_backward_on_recomputed_detached_values_does_not_reuse_the_graph() -> None:
    analysis, backwards = _analysis(TWO_UPDATES.replace("{REFAKE}", "G(frames, style).detach()"))
    assert analysis.graph_is_fresh(["loss"])
    assert analysis.recomputed_after(backwards[1])


def test_a_later_backward_through_a_value_made_before_the_first_reuses_it() -> None:
    analysis, backwards = _analysis(TWO_UPDATES.replace("{REFAKE}", "G(frames, style)"))
    assert not analysis.recomputed_after(backwards[1])  # `style` came from E before the first backward


def test_constants_set_up_once_are_not_carried_state() -> None:
    source = """
    class Trainer:
        def __init__(self, model, gama=0.8):
            self.model = model
            self.gama = gama
            self.prior = 0

        def train(self, batches):
            for batch in batches:
                loss = self.gama * self.model(batch).sum() + {EXTRA}
                loss.backward(retain_graph=True)

        def remember(self, value):
            self.prior = value
    """
    fresh, _ = _analysis(source.replace("{EXTRA}", "1.0"))
    assert fresh.graph_is_fresh(["loss"])
    carried, _ = _analysis(source.replace("{EXTRA}", "self.prior"))
    assert not carried.graph_is_fresh(["loss"])


DRAFTS = """
import torch

def refine(model, batch, steps):
    draft = None
    for k in range(steps):
        logits = model(batch, draft)
        loss = logits.logsumexp(-1).mean()
        loss.backward(retain_graph=True)
        draft = {DRAFT}
"""


def test_a_value_carried_from_the_last_pass_must_hold_no_graph() -> None:
    indices, _ = _analysis(DRAFTS.replace("{DRAFT}", "logits.argmax(-1)"))
    assert indices.graph_is_fresh(["loss"])
    soft, _ = _analysis(DRAFTS.replace("{DRAFT}", "logits.softmax(-1)"))
    assert not soft.graph_is_fresh(["loss"])  # read through `logits.logsumexp`: a value, not a callee


def test_a_parameter_read_in_a_loop_is_data_by_name_or_by_every_call() -> None:
    source = DRAFTS.replace("logits.logsumexp(-1).mean()", "logits.logsumexp(-1).mean() * {SCALE}")
    source = source.replace("{DRAFT}", "logits.argmax(-1)")
    assert _analysis(source.replace("{SCALE}", "batch.mean()"))[0].graph_is_fresh(["loss"])
    assert not _analysis(source.replace("{SCALE}", "steps"))[0].graph_is_fresh(["loss"])  # never called here
    called = source.replace("{SCALE}", "steps") + "\nrefine(net, torch.ones(2), 3)\n"
    assert _analysis(called)[0].graph_is_fresh(["loss"])


def test_a_local_loss_handed_back_cut_is_not_carried_state() -> None:
    source = """
    def training_step(self, batch):
        loss = self.loss(self(batch[0]))
        loss.backward(retain_graph=True)
        {TAIL}
    """
    hints = NameHints(_HINTS.is_data_iterable, _HINTS.is_data_parameter, _HINTS.is_state_name, lambda name: name == "detach")

    def fresh(tail: str) -> bool:
        analysis, _ = _analysis(source.replace("{TAIL}", tail))
        return FreshGraph(
            analysis.scope, analysis.call, analysis.parents, analysis.call_graph, analysis.imports, hints, analysis.no_graph
        ).graph_is_fresh(["loss"])

    assert fresh('return {"loss": loss.detach()}')
    assert not fresh("self.memory = self.memory.detach()")  # state cut on the module: carried
    assert not fresh("return self.memory.detach()")  # not a value of this call
