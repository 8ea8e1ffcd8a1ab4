"""See hand-written parameter updates (``w -= lr * w.grad`` under ``no_grad``).

A training loop without an optimizer updates its weights with in-place operations run
while grad mode is off (``w -= ...``, ``w.sub_(...)``), or through an alias that autograd
does not track, with grad mode on or off: ``w.data.add_(...)`` (pytorch/examples'
regression, the classic tutorials), ``w.detach().sub_(...)``. AGF002's
invariant ("the gradient used by an update is what backward added since the previous
update") applies to those updates exactly as to ``optimizer.step()``, so the probes
treat each one as a step of that one parameter. A `TorchFunctionMode` sees every torch
call of the run, so it is installed only for contracts that ask for steps.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

_IN_PLACE_DUNDERS = frozenset({"__iadd__", "__isub__", "__imul__", "__itruediv__", "__idiv__", "__ipow__"})


def is_in_place(func: Any) -> bool:
    """`func` writes into its first argument (``sub_``, ``copy_``, ``__isub__`` ...)."""
    name = getattr(func, "__name__", "")
    return name in _IN_PLACE_DUNDERS or (name.endswith("_") and not name.startswith("_"))


class ManualUpdateWatch(TorchFunctionMode):
    """Calls `on_update(tensor)` before every in-place operation run with grad mode off,
    or on a tensor that does not require grad (an alias such as ``w.data``: whether it
    shares a parameter's storage is the callback's question)."""

    def __init__(self, on_update: Callable[[torch.Tensor], None]) -> None:
        super().__init__()
        self._on_update = on_update

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if args and isinstance(args[0], torch.Tensor) and is_in_place(func) and (
            not torch.is_grad_enabled() or not args[0].requires_grad
        ):
            self._on_update(args[0])
        return func(*args, **(kwargs or {}))
