"""Unit tests for `codemods/semantic/accumulation.py`: what a training loop's iteration frees."""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.semantic.accumulation import LoopAnalysis, unfreed_sums
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
    assert [(passed, fits) for _, passed, fits in found] == [("losses", False)]  # `net.losses` is not in the file
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


def test_a_training_step_returning_its_loss_terms_makes_their_items_graph_carrying() -> None:
    source = """
        class DetLoss:
            def __call__(self, preds, targets):
                box = (preds - targets).abs().mean()
                cls = F.cross_entropy(preds, targets)
                parts = {"box": box, "cls": cls}
                return box + cls, parts

        class Trainer:
            def __init__(self):
                self.criterion = DetLoss()

            def step(self, x, y):
                loss, parts = self.criterion(self.model(x), y)
                loss.backward()
                return {RET}

            def epoch(self, loader):
                for x, y in loader:
                    out = self.step(x, y)
                    for name, value in out.items():
                        sums[name] += value
        """
    module = cst.parse_module(textwrap.dedent(source.replace("{RET}", "parts")))
    imports = ImportIndex.from_module(module)
    graph = CallGraph.build(module, imports)
    assert graph.attribute_class("Trainer", "criterion") == "DetLoss"
    loops = [node for node in all_nodes(module, cst.For) if isinstance(node, cst.For) and "self.step" in module.code_for_node(node)]
    analysis = LoopAnalysis(loops[0], imports, parent_map(module), graph, lambda name: "loss" in name)  # type: ignore[arg-type]
    assert analysis.graph_items == {"out"} and analysis.item_names == {"value"}
    assert [a.accumulator for a in analysis.accumulations()] == ["sums"]
    cut = cst.parse_module(textwrap.dedent(source.replace("{RET}", "{k: v.item() for k, v in parts.items()}")))
    cut_imports = ImportIndex.from_module(cut)
    cut_loop = next(n for n in all_nodes(cut, cst.For) if isinstance(n, cst.For) and "self.step" in cut.code_for_node(n))
    assert LoopAnalysis(cut_loop, cut_imports, parent_map(cut), CallGraph.build(cut, cut_imports), lambda n: "loss" in n).graph_items == set()  # type: ignore[arg-type]


def test_side_outputs_computed_from_the_losss_model_output_carry_a_graph() -> None:
    analysis = _loop(
        """
        def nll(target, mean, var, mask):
            return (((target - mean) ** 2 / var + var.log()) * mask).sum() / mask.sum()

        def hit_rate(target, mean):
            return (mean.round() == target).float().mean()

        def step(model, data):
            obs, truth, mask = data
            mean, var = model(obs)
            loss = nll(truth, mean, var, mask)
            held_out = nll(truth, mean, var, 1 - mask)
            hits = hit_rate(truth, mean)
            acc = (mean.argmax(-1) == truth).float().mean()
            given = truth.sum()
            return loss, held_out, hits, acc, given

        for data in loader:
            loss, held_out, hits, acc, given = step(model, data)
            loss.backward()
        """
    )
    assert "held_out" in analysis.tracked
    assert not {"hits", "acc", "given"} & analysis.tracked


_AVERAGED = """
    for data, label in train_loader:
        output = model(data)
        loss = criterion(output, label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        acc = (output.argmax(dim=1) == label).float().mean()
        epoch_accuracy += acc / len(train_loader)
        epoch_loss += {VALUE}
    """


def _accumulated(value: str) -> list[tuple[str, str]]:
    analysis = _loop(_AVERAGED.replace("{VALUE}", value))
    return [(a.accumulator, cst.Module([]).code_for_node(a.values[0])) for a in analysis.accumulations()]


def test_arithmetic_on_the_backpropagated_loss_keeps_its_graph() -> None:
    assert _accumulated("loss / len(train_loader)") == [("epoch_loss", "loss / len(train_loader)")]
    assert _accumulated("-loss * 0.5 + loss ** 2 % 3") == [("epoch_loss", "-loss * 0.5 + loss ** 2 % 3")]
    # cut before the arithmetic, or a bool: the argmax accuracy is never reported either
    assert _accumulated("loss.item() / len(train_loader)") == []
    assert _accumulated("float(loss) * data.size(0)") == []
    assert _accumulated("not loss") == []


def test_only_scalar_loss_with_numbers_is_a_scalar() -> None:
    analysis = _loop(_AVERAGED.replace("{VALUE}", "loss"))
    expression = lambda code: cst.parse_expression(code)  # noqa: E731
    assert analysis.is_scalar(expression("loss"))
    assert analysis.is_scalar(expression("(loss + loss) / 2 * len(train_loader)"))
    assert not analysis.is_scalar(expression("loss * weights"))  # `weights` may be a tensor of any shape
    assert not analysis.is_scalar(expression("output / len(train_loader)"))
    assert not analysis.is_scalar(expression("len(train_loader)"))


_EPOCHS = """
    def train_epoch(train_iter, criterion, model, optimizer):
        epoch_loss_train, epoch_loss_eval, steps = 0, 0, 0
        for story, highlight in train_iter:
            optimizer.zero_grad()
            batch_loss_train = criterion(model(story), highlight)
            batch_loss_train.backward()
            epoch_loss_train += {VALUE}
            epoch_loss_eval += criterion(model(story), highlight).item()
            steps += 1
            optimizer.step()
        return {RETURNED}

    def train(train_iter, criterion, model, optimizer):
        kept = []
        for epoch in range(3):
            {TARGET} = train_epoch(train_iter, criterion, model, optimizer)
            kept.append(epoch_loss_train)
    """


def _epochs(value: str, returned: str, target: str) -> set[str]:
    source = _EPOCHS.replace("{VALUE}", value).replace("{RETURNED}", returned).replace("{TARGET}", target)
    module = cst.parse_module(textwrap.dedent(source))
    imports = ImportIndex.from_module(module)
    loop = [node for node in all_nodes(module, cst.For) if "range(3)" in module.code_for_node(node.iter)][0]
    assert isinstance(loop, cst.For)
    return LoopAnalysis(loop, imports, parent_map(module), CallGraph.build(module, imports), lambda n: "loss" in n).tracked


def test_a_returned_sum_of_backpropagated_losses_carries_their_graphs() -> None:
    unpacked = "epoch_loss_train, epoch_loss_eval"
    assert _epochs("batch_loss_train", "epoch_loss_train / len(train_iter), epoch_loss_eval", unpacked) == {"epoch_loss_train"}
    assert _epochs("batch_loss_train", "epoch_loss_train", "epoch_loss_train") == {"epoch_loss_train"}
    # a sum of numbers, of a number, a count, a call on the sum: nothing is followed
    assert _epochs("batch_loss_train.item()", "epoch_loss_train, epoch_loss_eval", unpacked) == set()
    assert _epochs("batch_loss_train", "epoch_loss_eval, epoch_loss_train", "epoch_loss_eval, epoch_loss_train") == {"epoch_loss_train"}
    assert _epochs("batch_loss_train", "steps, epoch_loss_eval", unpacked) == set()
    assert _epochs("batch_loss_train", "epoch_loss_train.mean(), steps", unpacked) == set()


_TRAIN_AND_EVAL = """
    import torch

    def run_epoch(model, train_iter, test_iter, criterion, optimizer):
        epoch_loss_eval, n = 0, 0
        model.train()
        for x, y in train_iter:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        model.eval()
        {WITH}for x, y in test_iter:
        {IN}    output = {FORWARD}
        {IN}    batch_loss_eval = 0
        {IN}    for sequence, target in zip(output, y):
        {IN}        batch_loss_eval += {TERM}
        {IN}    epoch_loss_eval += batch_loss_eval
        {IN}    n += 1
        return epoch_loss_eval
    """


def _unfreed(term: str = "criterion(sequence, target)", forward: str = "model(x)", no_grad: bool = False) -> set[str]:
    source = _TRAIN_AND_EVAL.replace("{TERM}", term).replace("{FORWARD}", forward)
    source = source.replace("{WITH}", "with torch.no_grad():\n            " if no_grad else "").replace("{IN}", "    " if no_grad else "")
    module = cst.parse_module(textwrap.dedent(source))
    imports = ImportIndex.from_module(module)
    function = next(node for node in all_nodes(module, cst.FunctionDef))
    assert isinstance(function, cst.FunctionDef)
    return unfreed_sums(function, imports, CallGraph.build(module, imports), lambda name: "criterion" in name)


def test_evaluation_sums_of_the_trained_model_hold_unfreed_graphs() -> None:
    assert _unfreed() == {"epoch_loss_eval"}
    # no graph: a number, grad off, another callable than the trained model, no loss call
    assert _unfreed(term="criterion(sequence, target).item()") == set()
    assert _unfreed(no_grad=True) == set()
    assert _unfreed(forward="teacher(x)") == set()
    assert _unfreed(term="(sequence.argmax(-1) == target).sum()") == set()


def test_frozen_parameters_or_a_grad_mode_switch_make_the_evaluation_graph_unknown() -> None:
    assert _unfreed(forward="model(x.requires_grad_(False))") == set()
    assert _unfreed(forward="model(x) if torch.set_grad_enabled(False) else None") == set()
