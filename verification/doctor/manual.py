"""Hand-written updates that use stale gradients (AGF002 without an optimizer).

A training loop with no optimizer updates its leaves itself: ``w -= lr * w.grad`` under
``no_grad``, or ``p.data.add_(-lr * p.grad)`` (which does not even bump ``w._version``).
No hook sees such an update, so it is seen by its effect: each leaf a backward reaches
(while the run has made no optimizer step) gets a mark, its version and the sum of its
values, checked again at the next backward and at the end; a changed mark is one update.
A leaf's gradient hook says when its ``.grad`` starts afresh (None or zeros before the
gradient is added), as for optimizer steps: an update whose ``.grad`` holds gradients
from before the leaf's previous update used stale gradients.

Leaves are held weakly (a fresh input leaf made each iteration must die as it would),
and at most `MAX_LEAVES` are watched. Cost: one sum per watched leaf per backward, and
only until the run's first optimizer step.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

import torch

#: leaves watched for hand-written updates, at most
MAX_LEAVES = 256


def _mark(leaf: torch.Tensor) -> tuple[int, str]:
    with torch.no_grad():
        return leaf._version, repr(float(leaf.detach().double().sum()))


class HandUpdates:
    """The leaves backward passes reach, their marks, and the stale updates seen."""

    def __init__(self) -> None:
        self._leaves: dict[int, weakref.ref] = {}
        self._marks: dict[int, tuple[int, str]] = {}
        self._earliest: dict[int, int] = {}
        self._taken: dict[int, int] = {}
        self.updates = 0
        self.stale: list[dict[str, Any]] = []

    def see(self, leaf: torch.Tensor) -> None:
        """A leaf a backward is about to reach (watched from now on)."""
        key = id(leaf)
        known = self._leaves.get(key)
        if known is not None and known() is leaf:
            return
        if len(self._leaves) >= MAX_LEAVES:
            self._leaves = {k: r for k, r in self._leaves.items() if r() is not None}
            if len(self._leaves) >= MAX_LEAVES:
                return
        self._leaves[key] = weakref.ref(leaf)
        self._marks[key] = _mark(leaf)
        self._earliest.pop(key, None)
        self._taken[key] = 0
        leaf.register_hook(lambda grad, key=key: self._on_grad(key))

    def _on_grad(self, key: int) -> None:
        ref = self._leaves.get(key)
        leaf = ref() if ref is not None else None
        if leaf is None:
            return
        current = leaf.grad
        if current is None or key not in self._earliest or not bool(current.any()):
            self._earliest[key] = self._taken[key]

    def check(self, site: tuple[str, int] | None, names: Callable[[], dict[int, str]]) -> None:
        """Called at each backward (before it runs) and at the end: the leaves changed
        since their last mark were updated; those whose ``.grad`` spans two updates
        were updated with stale gradients. `site`: the backward's (None at the end)."""
        stale, updated = [], 0
        for key, ref in list(self._leaves.items()):
            leaf = ref()
            if leaf is None:
                del self._leaves[key]
                continue
            mark = _mark(leaf)
            if mark == self._marks[key]:
                continue
            self._marks[key] = mark
            updated += 1
            taken = self._taken[key]
            grad = leaf.grad
            if grad is not None and self._earliest.get(key, taken) < taken and bool(grad.any()):
                stale.append((key, taken - self._earliest[key] + 1))
            self._taken[key] = taken + 1
        if not updated:
            return
        self.updates += 1
        if stale:
            known = names()
            self.stale.append({
                "optimizer": "hand-written update", "step": self.updates, "site": None,
                "backward_site": list(site) if site else None, "params": len(stale), "of": updated,
                "steps_mixed": max(n for _, n in stale), "names": [known.get(key, "a leaf") for key, _ in stale[:4]],
            })

    def stop(self) -> None:
        """An optimizer stepped: its parameters' updates are its own (watched there)."""
        self._leaves.clear()
