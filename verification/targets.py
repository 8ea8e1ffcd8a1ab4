"""Targets shaped by the loss a unit uses.

Why a loss decides: cross-entropy and NLL need class indices below the output's class
count (shape ``[N]``, long), BCE needs floats in [0, 1] shaped like the output, MSE/L1
need output-shaped floats. A target of the wrong kind makes the original raise, and a
patch that cannot be compared stays `unverified`.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

import torch
from torch import nn

CE, BCE, REGRESSION = "ce", "bce", "mse"

_CE_HINT = re.compile(r"cross_entropy|CrossEntropy|nll_loss|NLLLoss|argmax|num_classes|accuracy")
_REG_HINT = re.compile(r"mse|MSELoss|l1_loss|L1Loss|smooth_l1|SmoothL1|huber|Huber")
_BCE_HINT = re.compile(r"binary_cross|BCELoss|BCEWithLogits")
#: outputs squashed to (0, 1) before the loss: targets in [0, 1] shaped like the output
#: suit BCE and MSE alike, so this is the weakest hint
_SIGMOID_HINT = re.compile(r"\bsigmoid\b|Sigmoid\(")
#: loss classes by the targets they need
_LOSS_KINDS = {
    "CrossEntropyLoss": CE, "NLLLoss": CE, "BCELoss": BCE, "BCEWithLogitsLoss": BCE, "MSELoss": REGRESSION,
    "L1Loss": REGRESSION, "SmoothL1Loss": REGRESSION, "HuberLoss": REGRESSION,
}
#: where a model's dict output keeps the tensor a loss reads
_OUTPUT_KEYS = ("logits", "out", "output", "outputs", "pred", "preds", "prediction", "y", "y_hat", "scores")


def loss_output(out: Any) -> torch.Tensor | None:
    """The tensor a loss reads from a model's output (a tuple's first tensor, a dict's
    or an output object's logits); None when there is none."""
    for _ in range(4):
        if isinstance(out, torch.Tensor):
            return out
        if isinstance(out, dict) and out:
            key = next((k for k in _OUTPUT_KEYS if isinstance(out.get(k), torch.Tensor)), None)
            out = out[key] if key else next(iter(out.values()))
        elif isinstance(out, (tuple, list)) and out:
            out = next((item for item in out if isinstance(item, torch.Tensor)), out[0])
        elif hasattr(out, "logits"):
            out = out.logits
        else:
            break
    return out if isinstance(out, torch.Tensor) else None


def loss_kind(out: torch.Tensor, read_names: Iterable[str], namespace: dict[str, Any], texts: Iterable[str]) -> str:
    """Which targets the loss needs: from a loss object the unit reads (`read_names` in
    `namespace`), then hints in `texts` (the unit's own, then the file's), then the
    output's shape."""
    for name in sorted(read_names):
        value = namespace.get(name)
        if isinstance(value, nn.modules.loss._Loss) and type(value).__name__ in _LOSS_KINDS:
            return _LOSS_KINDS[type(value).__name__]
    for text in texts:
        for hint, kind in ((_BCE_HINT, BCE), (_REG_HINT, REGRESSION), (_CE_HINT, CE), (_SIGMOID_HINT, BCE)):
            if text and hint.search(text):
                return kind
    return CE if out.dim() >= 2 and out.shape[-1] > 1 else REGRESSION


def class_count(out: torch.Tensor) -> int:
    return int(out.shape[-1]) if out.dim() >= 2 else 1


def make_target(kind: str, out_shape: torch.Size, classes: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """Class indices below `classes` (the output's shape without its last dimension) for
    cross-entropy, floats in [0, 1] for BCE, normal floats otherwise (output-shaped)."""
    if kind == CE:
        return torch.randint(0, max(int(classes), 1), tuple(out_shape[:-1]), device=device)
    if kind == BCE:
        return torch.rand(out_shape, device=device, dtype=dtype)
    return torch.randn(out_shape, device=device, dtype=dtype)


def criterion_for(kind: str) -> nn.Module:
    """A loss that accepts `kind`'s targets (BCE with logits: any output range)."""
    return {CE: nn.CrossEntropyLoss, BCE: nn.BCEWithLogitsLoss}.get(kind, nn.MSELoss)()
