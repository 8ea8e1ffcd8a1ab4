"""A float64 reference run: what the original computes when float32 neither overflows nor
loses digits.

Why: a fix for a numerically unstable formula (AGF016: ``log(1 + x)`` -> ``log1p(x)``,
``log(sum(exp(x)))`` -> ``logsumexp(x)``) changes float32 results on purpose where the
naive form overflows (``inf`` loss, ``nan`` gradient) or loses precision; comparing the
two runs for equality rejects it. "Equal where the original is finite" is unsound both
ways: underflow makes the precise form look wrong, and a partial overflow leaves finite
but wrong gradients. The judge is the original itself, computed in float64 (the same
program under `ReferenceMode`, seeds, random draws and loop caps as in the run): the rewritten
float32 values must be at least as close to it as the original's, everywhere
(`contracts.check_closer_to_float64_reference`).

Parameters keep the dtype the program gives them (they are made and initialised as in the
run, with the same draws); every operation on them computes in float64, their gradients
are rounded to their dtype, and an optimizer's step runs in that dtype, as written.

Scripts only (the whole program re-run in the run's child, after the run itself); what
it records: the script's outputs, the gradients of its global leaves and of its global
modules' parameters (named as the run's probes name them), and what it printed.
"""

from __future__ import annotations

import builtins
import contextlib
import sys
from typing import Any, Callable

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from .bounded import StopRun
from .float64 import Float64Mode
from .printed import PrintedText
from .probes import named_leaves
from .record import serialize


#: operations that draw random numbers: a float64 draw is another sequence than a float32
#: one, so the reference draws as the run did (in the dtype asked for) and widens after
_DRAWS = frozenset({"randn", "rand", "normal", "randn_like", "rand_like", "uniform", "bernoulli"})
#: random masks drawn in the input's dtype: drawn on a float32 input as in the run
_MASKS = frozenset({"dropout", "dropout1d", "dropout2d", "dropout3d", "feature_dropout", "alpha_dropout",
                    "feature_alpha_dropout"})


class ReferenceMode(Float64Mode):
    """`Float64Mode`, except that random numbers are drawn exactly as the float32 run drew
    them (same seeds, same sequence), then widened: the reference computes the run's own
    numbers in float64, not other numbers."""

    def __init__(self) -> None:
        super().__init__()
        #: inside an optimizer's step: parameters (and their state) keep the run's dtype,
        #: so the step runs as the program wrote it, on the reference's gradients
        self.stepping = 0

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = getattr(func, "__name__", "") or ""
        if self.stepping:
            return func(*args, **(kwargs or {}))
        if name in _DRAWS:
            result = func(*args, **(kwargs or {}))
            return result.double() if isinstance(result, torch.Tensor) and result.dtype in _NARROW else result
        if name in _MASKS and args and isinstance(args[0], torch.Tensor) and args[0].dtype == torch.float64:
            return func(args[0].float(), *args[1:], **(kwargs or {})).double()
        return super().__torch_function__(func, types, args, kwargs)


_NARROW = frozenset({torch.float32, torch.float16, torch.bfloat16})


def _leaf_grads(namespace: dict[str, Any]) -> dict[str, Any]:
    public = {name: value for name, value in namespace.items() if not name.startswith("_")}
    return {name: serialize(leaf.grad.detach().clone()) for name, leaf in named_leaves(public).items()
            if leaf.grad is not None}


def float64_reference(code: Any, path: str, argv: list[str], reset: Callable[[], None], seed: Callable[[], None],
                      outputs: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """Run the compiled script `code` once more with every floating tensor float64.

    `reset` and `seed` put the loop caps and the seeds back as the run had them;
    `outputs` picks the results out of the finished namespace (the run's own rule)."""
    namespace: dict[str, Any] = {"__name__": "__main__", "__file__": path, "__builtins__": builtins}
    printed = PrintedText()
    saved_argv = sys.argv
    sys.argv = [path, *argv]
    reset()
    seed()
    error = None
    try:
        # the default dtype stays: parameters are made and initialised as in the run (the
        # same draws), and every operation on them computes in float64
        mode = ReferenceMode()
        with contextlib.ExitStack() as stack:
            stack.callback(register_optimizer_step_pre_hook(lambda *_: setattr(mode, "stepping", mode.stepping + 1)).remove)
            stack.callback(register_optimizer_step_post_hook(lambda *_: setattr(mode, "stepping", mode.stepping - 1)).remove)
            stack.enter_context(mode)
            stack.enter_context(contextlib.redirect_stdout(printed))
            exec(code, namespace)  # noqa: S102 - the user's program, as in the run itself
    except StopRun:
        pass  # it stopped where the run stopped, at the changed function's return (`reset(keep_stop=True)`)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            error = f"sys.exit({exc.code!r})"
    except BaseException as exc:  # noqa: BLE001 - its error is the reference's, reported
        error = f"{type(exc).__name__}: {str(exc)[:200]}"
    finally:
        sys.argv = saved_argv
    return {
        "error": error,
        "outputs": {name: serialize(value) for name, value in outputs(namespace).items()},
        "leaf_grads": _leaf_grads(namespace),
        "printed": printed.record(),
    }
