"""Gradient accumulation without loss scaling (AGF019), as a run shows it.

An optimizer step whose parameters' ``.grad`` was started afresh (None or zeros) within
its own window and then received the gradients of two or more backward passes of one
line (micro-batches: the same ``loss.backward()`` in a loop) steps on their *sum*. That
is what the user meant only when each micro-batch's loss was scaled down first, or
when the gradients were divided before the step. So the evidence is measured, never
read from names:

* each backward's root: a mean reduction below it (``MeanBackward``, a loss node whose
  saved ``reduction`` is mean) with no division or multiplication on top of it (the
  usual ``loss / accumulation_steps``): a mean loss backpropagated unscaled;
* at the step, one parameter's gradient norm against its norm after the last backward:
  divided in place by the number of backward passes (``p.grad.div_(k)``) is scaling too.

Backward passes of different lines that feed one step (a GAN discriminator's real and
fake losses) are terms of one loss, not micro-batches: not counted.

Runs in the sandboxed run child (`watch.Watch` calls it); costs one node look-up per
backward root and one gradient norm per backward.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import torch

Site = tuple[str, int]

#: nodes looked at below a backward's root when looking for its mean reduction
REDUCTION_DEPTH = 12
#: relative tolerance of "the gradients were divided by k" at the step
RESCALE_TOLERANCE = 1e-3
#: loss nodes' saved ``reduction`` value for "mean" (torch's Reduction enum)
MEAN_REDUCTION = 1


def _mean_unscaled(roots: list[torch.Tensor]) -> bool:
    """Whether every root is a mean-reduced loss with no scaling on top of it."""
    if not roots:
        return False
    for root in roots:
        node = root.grad_fn
        if node is None or root.numel() != 1:
            return False
        if type(node).__name__.startswith(("DivBackward", "MulBackward")):
            return False  # scaled (``loss / k``, ``loss * (1 / k)``, a scaler's factor)
        if not _mean_below(node):
            return False
    return True


def _mean_below(top: Any) -> bool:
    stack, seen = [top], 0
    while stack and seen < REDUCTION_DEPTH:
        node = stack.pop(0)
        seen += 1
        name = type(node).__name__
        if name.startswith("Mean") or getattr(node, "_saved_reduction", None) == MEAN_REDUCTION:
            return True
        if name.startswith(("DivBackward", "MulBackward")) and node is not top:
            continue  # a term scaled on its own (``coeff * sparsity``): look at the others
        stack.extend(nxt for nxt, _ in node.next_functions if nxt is not None)
    return False


@dataclass
class _Backward:
    index: int
    site: Site | None
    unscaled_mean: bool


@dataclass
class AccumulationWatch:
    """The accumulation windows of one run, judged at each optimizer step."""

    #: parameter key -> index of the backward pass that started its current ``.grad``
    starts: dict[int, int] = field(default_factory=dict)
    #: the backward passes of the run so far (only their site and root kind)
    backwards: list[_Backward] = field(default_factory=list)
    #: (parameter key, its gradient norm) right after the last backward
    probe: tuple[int, float] | None = None
    #: backward site -> what was seen there
    found: dict[Site, dict[str, Any]] = field(default_factory=dict)

    def grad_started(self, key: int, backward_index: int) -> None:
        """A gradient arrives into a ``.grad`` that was None or zeros."""
        self.starts[key] = backward_index

    def before_backward(self, index: int, site: Site | None, roots: list[torch.Tensor]) -> None:
        self.backwards.append(_Backward(index, site, _mean_unscaled(roots)))
        if len(self.backwards) > 4096:
            del self.backwards[:2048]

    def after_backward(self, params: dict[int, torch.Tensor]) -> None:
        for key, param in params.items():
            if param.grad is not None:
                self.probe = (key, float(param.grad.detach().double().norm()))
                return
        self.probe = None

    def step(self, optimizer: str, params: Iterable[tuple[int, torch.Tensor]], backward_count: int,
             last_step_backward: int) -> None:
        """Judge the window this step closes: `last_step_backward` is the backward count
        at the same optimizer's previous step (a window starts after it)."""
        keys = {key: param for key, param in params if param.grad is not None and key in self.starts}
        if not keys:
            return
        start = min(self.starts[key] for key in keys)
        if start < last_step_backward:
            return  # .grad kept from before the previous step: AGF002's finding, not this
        window = [b for b in self.backwards if start <= b.index < backward_count]
        count = len(window)
        sites = {b.site for b in window}
        if count < 2 or len(sites) != 1 or None in sites or not all(b.unscaled_mean for b in window):
            return
        if self.probe is not None and self.probe[0] in keys and self.probe[1] > 0:
            now = float(keys[self.probe[0]].grad.detach().double().norm())
            if abs(now / self.probe[1] * count - 1.0) < RESCALE_TOLERANCE:
                return  # the gradients were divided by the window's size before the step
        site = next(iter(sites))
        entry = self.found.setdefault(site, {"steps": 0, "backwards": 0, "optimizer": optimizer})
        entry["steps"] += 1
        entry["backwards"] = max(entry["backwards"], count)

    def record(self) -> list[dict[str, Any]]:
        return [{"file": site[0], "line": site[1], **entry} for site, entry in self.found.items()]
