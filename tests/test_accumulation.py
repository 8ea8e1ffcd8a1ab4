"""Unit tests for `codemods/semantic/accumulation.py`: what a training loop's iteration frees."""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.semantic.accumulation import LoopAnalysis
from autograd_fix.codemods.semantic.callgraph import CallGraph
from autograd_fix.codemods.semantic.loops import all_nodes, parent_map


def _loop(source: str) -> LoopAnalysis:
    module = cst.parse_module(textwrap.dedent(source))
    imports = ImportIndex.from_module(module)
    loop = next(node for node in all_nodes(module, cst.For) if "backward" in module.code_for_node(node))
    assert isinstance(loop, cst.For)
    return LoopAnalysis(loop, imports, parent_map(module), CallGraph.build(module, imports), lambda name: "loss" in name)


def test_terms_returned_beside_the_backpropagated_total_carry_its_graph() -> None:
    analysis = _loop(
        """
        import torch.nn.functional as F

        def my_loss(logits, boxes, y, target):
            mse = F.mse_loss(boxes, target)
            ce = F.cross_entropy(logits, y)
            acc = (logits.argmax(1) == y).float().mean()
            loss = mse + ce
            return loss, mse, ce, acc

        for x, y, target in loader:
            logits, boxes = net(x)
            loss, mse, ce, acc = my_loss(logits, boxes, y, target)
            loss.backward()
        """
    )
    assert {"loss", "mse", "ce"} <= analysis.tracked
    assert "acc" not in analysis.tracked


def test_a_tracker_method_summing_a_loss_dict_into_its_state() -> None:
    source = """
        class Meter:
            def update(self, batch_losses):
                for key in batch_losses:
                    self.sums[key] += batch_losses[key]

        for x in loader:
            losses = net.losses(x)
            losses["total"].backward()
            meter.update({ARG})
        """
    found = _loop(source.replace("{ARG}", "losses")).tracker_accumulations()
    assert [passed for _, passed in found] == ["losses"]
    assert _loop(source.replace("{ARG}", "{k: v.item() for k, v in losses.items()}")).tracker_accumulations() == []


def test_a_step_dict_whose_other_items_hold_no_graph_is_detachable_by_item() -> None:
    source = """
        class Model:
            def training_step(self, batch):
                loss = self.net(batch).mean()
                return {"loss": loss, "metrics": {"mae": loss.item()}, "logits": {EXTRA}}

        for batch in loader:
            output = model.training_step(batch)
            output["loss"].backward()
            outputs.append(output)
        """
    assert _loop(source.replace("{EXTRA}", "0")).detachable_items("output") == ['output["loss"]']
    assert _loop(source.replace("{EXTRA}", "self.net(batch)")).detachable_items("output") == []
