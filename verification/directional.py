"""Do a run's gradients match finite differences?  A directional derivative, re-run three times.

For fixes meant to *change* gradients (a graph break mended, a ``.data`` mutation that made
them silently wrong) the original's gradients are no reference: the truth is the
derivative of the loss. Checking every parameter would cost one forward pass per
element; a derivative along one random direction v costs two:

    <grad L(theta), v>   vs   (L(theta + eps v) - L(theta - eps v)) / (2 eps)

The unit (a function with bound inputs, or the whole script) runs three times with
float64 as torch's default dtype and the same seeds: once to get autograd's gradient,
and once each with the parameters moved by +eps v and -eps v. What L is: the loss that
reaches the first ``backward`` (or ``torch.autograd.grad``), weighted by its
``gradient`` argument; for a unit that never calls backward, its floating outputs
weighted by a fixed random tensor. The run stops there (a private exception), so a
training loop costs one forward pass. theta: the parameters of every module that runs
a forward before that backward (all of an outermost module's parameters are moved at
its first call, so tied weights move once), and, in function mode, the unit's
floating-point tensor arguments. Each gets its own direction, drawn from a generator
seeded by its name (``Net#0.fc1.weight``, ``arg0``), so the three runs agree.

The re-runs run under `float64.Float64Mode`: tensors the code makes itself with a lower
precision (``.float()``, ``dtype=torch.float32``, a float32 numpy array) become float64
too, so they neither break the re-run against float64 parameters nor blur the difference.

The same machinery moves the unit to a second point (`second_point`): parameters moved
by a tenth of their own size along a seeded direction (a tenth of one where they are
all zero), the unit's tensor inputs likewise, the run's seeds changed (so the data a
script draws changes too), identically on both sides; the first loss (or the weighted
outputs) there is one more value the contracts compare. One comparison point proves
nothing about a term that vanishes there: ``h + 0 * self.time_bias[t]`` equals
``h + self.time_bias[t]`` while ``time_bias`` is all zeros, not after it moved. What is
compared there is the sum of the losses backpropagated before the first optimizer step
(at most `WINDOW_BACKWARDS` of them; each backward runs), not only the first: the first
step's gradient is the gradient of that sum, and a fix that merges two backward passes
over a shared graph into one (``(l1 + l2).backward()``) changes the first loss but not the
sum. A backward that raises ends the window with its own loss counted.

"Where possible": a loss that is not float64 even so, a
version that raises before its first backward, a backward that raises, or a first
re-run slower than `FD_RERUN_BUDGET_S` (the re-runs share the run's time limit) make the
check not applicable, never a pass.
"""

from __future__ import annotations

import contextlib
import io
import math
import time
import zlib
from typing import Any, Callable

import torch
import torch.optim.optimizer as _optimizer_module
from torch import nn

from .float64 import Float64Mode
from .probes import ModuleNames, leaves_of

FD_EPS = 1e-6
FD_ATOL, FD_RTOL = 1e-5, 1e-3
#: the two perturbed re-runs are skipped (not applicable) when the first took longer:
#: they share the run's time limit with the run itself
FD_RERUN_BUDGET_S = 4.0
#: the second point: each parameter and input moves by this fraction of its root mean
#: square (of 1 where that is 0) along its direction; the run's seeds move by SEED_SHIFT
SECOND_POINT_SCALE = 0.1
SECOND_POINT_SEED_SHIFT = 7919
#: the later backward passes checked besides the first (`later_backward_checks`): the
#: second and third, which in a GAN or a VAE with a discriminator are the other losses
LATER_BACKWARDS = (2, 3)
#: the second point sums the losses of at most this many backward passes before the
#: first optimizer step (a run that never steps stops there)
WINDOW_BACKWARDS = 8


class _Stop(BaseException):
    """Raised from the first backward to end a re-run (not an Exception: user code's
    ``except Exception`` must not swallow it)."""


def _as_list(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for t in (value or ()) if isinstance(t, torch.Tensor)]


class Perturbation:
    """One re-run's instrumentation: moves parameters by eps * v, captures the first loss."""

    def __init__(self, eps: float, seed: int, *, analytic: bool, float64: bool = True, relative: bool = False,
                 run_seed: int = 0, at: int = 1, only: frozenset[str] | None = None,
                 replay: list[list[torch.Tensor | None]] | None = None, window: bool = False) -> None:
        self.eps = eps
        #: the second point: every backward runs and its loss is added to `window_loss`,
        #: until the first optimizer step (or `WINDOW_BACKWARDS` passes, or one that raises)
        self.window = window
        self.window_loss: float | None = None
        self.window_backwards = 0
        #: how the window ended: "step" (the first optimizer step), "error" (a backward
        #: raised), "cap" (`WINDOW_BACKWARDS`), or "end" (the run returned)
        self.window_end = "end"
        self.seed = seed
        self.analytic = analytic
        #: run in float64 (`Float64Mode`); the second point keeps the code's own dtypes
        self.float64 = float64
        #: move each tensor by eps times its own root mean square (1 where that is 0)
        self.relative = relative
        #: added to the seeds the unit's re-run sets (0: the run's own seeds)
        self.run_seed = run_seed
        #: the backward pass (1-based) whose loss is L; the earlier ones run (base run:
        #: their gradients kept in `events`) or are replayed from `replay` (moved runs)
        self.at = at
        #: the tensors moved (None: every one met); a later backward moves only those that
        #: nothing changed in place before it (`unchanged` of the base run)
        self.only = only
        self.replay = replay
        self.events: list[list[torch.Tensor | None]] = []
        self.calls = 0
        #: per target, its version counter when first met: an optimizer step or a hand
        #: update before backward `at` bumps it
        self.versions: dict[str, int] = {}
        self.unchanged: list[str] = []
        #: base run at a later backward: each unchanged target's part of <grad, v>, and
        #: the targets of the optimizer that steps next (what this loss is meant to train)
        self.parts: dict[str, float] = {}
        self.trained: list[str] | None = None
        self._awaiting_step = False
        self.targets: dict[str, torch.Tensor] = {}
        self.directions: dict[str, torch.Tensor] = {}
        self.loss: float | None = None
        self.loss_dtype: torch.dtype | None = None
        self.derivative: float | None = None
        self.error: str | None = None
        self._module_names = ModuleNames()
        self._grad = torch.autograd.grad
        self._undo: list[Callable[[], None]] = []

    def direction(self, name: str, like: torch.Tensor) -> torch.Tensor:
        generator = torch.Generator().manual_seed(self.seed + zlib.crc32(name.encode()))
        return torch.randn(like.shape, generator=generator, dtype=torch.float64).to(like.device)

    def perturb(self, name: str, tensor: torch.Tensor) -> None:
        """Move `tensor` (in place) along its direction; it becomes one of theta's parts."""
        if not tensor.is_floating_point() or any(tensor is t for t in self.targets.values()):
            return
        if self.only is not None and name not in self.only:
            return
        self.versions[name] = tensor._version
        direction = self.direction(name, tensor)
        if self.eps:
            with torch.no_grad():
                size = float(tensor.detach().double().pow(2).mean().sqrt()) if self.relative and tensor.numel() else 1.0
                step = self.eps * (size if size > 0 and math.isfinite(size) else 1.0)
                tensor.add_(direction.to(tensor.dtype), alpha=step)
        self.targets[name] = tensor
        self.directions[name] = direction

    def _on_forward(self, module: nn.Module, args: Any) -> None:
        prefix = self._module_names.first_call(module)
        if prefix is None:
            return
        for name, param in module.named_parameters():
            if param.requires_grad:
                self.perturb(f"{prefix}.{name}", param)

    def capture(self, roots: Any, weights: Any) -> None:
        """L from the tensors a backward starts at; autograd's derivative along v if asked."""
        tensors = [t for t in _as_list(roots) if t.is_floating_point()]
        if not tensors:
            self.error = "the first backward starts from no floating-point tensor"
            raise _Stop
        weight_list = _as_list(weights) if weights is not None else []
        total = None
        for index, tensor in enumerate(tensors):
            term = tensor * weight_list[index] if index < len(weight_list) else tensor
            total = term.sum() if total is None else total + term.sum()
        assert total is not None
        self.loss_dtype = tensors[0].dtype
        self.loss = float(total.detach())
        if self.analytic:
            names = list(self.targets)
            if self.at > 1:
                # theta at a later backward: only what no step or update changed in place
                # since it was met (its earlier uses and this loss saw the same values)
                names = [n for n in names if self.targets[n]._version == self.versions.get(n)]
                self.unchanged = names
                if not names:
                    self.error = f"every tensor it reaches was changed in place (a step) before backward {self.at}"
                    raise _Stop
            try:
                wanted = [self.targets[n] for n in names]
                grads = self._grad(total, wanted, allow_unused=True) if total.requires_grad and wanted else [None] * len(names)
            except Exception as exc:  # noqa: BLE001 - the original's backward may be what is broken
                self.error = f"autograd raised {type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"
                raise _Stop from None
            self.parts = {n: float((g.double() * self.directions[n]).sum()) for n, g in zip(names, grads) if g is not None}
            self.derivative = float(sum(self.parts.values())) if names else 0.0
            if self.at > 1:
                # what this loss trains: the parameters of the optimizer that steps next
                self._awaiting_step = True
                return
        raise _Stop

    def _window_pass(self, roots: Any, weights: Any, run: Callable[[], Any]) -> Any:
        """Second point: one backward of the window before the first step; its loss is
        added to the window's, then it runs (a backward that raises ends the window)."""
        first = self.loss
        try:
            self.capture(roots, weights)
        except _Stop:
            pass
        if self.error is not None:
            raise _Stop
        self.window_loss = (self.window_loss or 0.0) + float(self.loss or 0.0)
        if first is not None:
            self.loss = first  # `loss` stays the first backward's
        self.window_backwards += 1
        if self.window_backwards >= WINDOW_BACKWARDS:
            self.window_end = "cap"
            raise _Stop
        try:
            return run()
        except Exception:  # noqa: BLE001 - a backward that raises ends the window, its loss counted
            self.window_end = "error"
            raise _Stop from None

    def _on_step(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if self.window and self.window_backwards:
            self.window_end = "step"
            raise _Stop
        if not self._awaiting_step:
            return
        stepped = {id(p) for group in optimizer.param_groups for p in group["params"]}
        self.trained = [name for name in self.unchanged if id(self.targets[name]) in stepped]
        self.derivative = float(sum(self.parts.get(name, 0.0) for name in self.trained))
        raise _Stop

    def install(self) -> None:
        handle = nn.modules.module.register_module_forward_pre_hook(self._on_forward)
        self._undo.append(handle.remove)
        original_backward, original_grad = torch.autograd.backward, torch.autograd.grad

        def backward(tensors, grad_tensors=None, *args, **kwargs):
            self.calls += 1
            if self._awaiting_step:
                self.error = f"no optimizer stepped between backward {self.at} and the next"
                raise _Stop
            if self.window:
                return self._window_pass(tensors, grad_tensors, lambda: original_backward(tensors, grad_tensors, *args, **kwargs))
            if self.calls < self.at:
                return self._earlier(tensors, kwargs.get("inputs"), lambda: original_backward(tensors, grad_tensors, *args, **kwargs))
            self.capture(tensors, grad_tensors)

        def grad(outputs, inputs=None, grad_outputs=None, *args, **kwargs):
            self.calls += 1
            if self.window:
                return self._window_pass(outputs, grad_outputs, lambda: original_grad(outputs, inputs, grad_outputs, *args, **kwargs))
            if self.calls < self.at:
                return self._earlier_grad(lambda: original_grad(outputs, inputs, grad_outputs, *args, **kwargs))
            if self.at > 1 and self.analytic:
                self.error = f"backward {self.at} is a torch.autograd.grad call, whose result the run needs"
                raise _Stop
            self.capture(outputs, grad_outputs)

        torch.autograd.backward = backward
        torch.autograd.grad = grad
        if self.at > 1 or self.window:
            step_handle = _optimizer_module.register_optimizer_step_pre_hook(self._on_step)
            self._undo.append(step_handle.remove)
        self._undo.append(lambda: setattr(torch.autograd, "backward", original_backward))
        self._undo.append(lambda: setattr(torch.autograd, "grad", original_grad))
        if not self.float64:
            return
        previous_dtype = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        self._undo.append(lambda: torch.set_default_dtype(previous_dtype))
        mode = Float64Mode()
        mode.__enter__()
        self._undo.append(lambda: mode.__exit__(None, None, None))

    def _earlier(self, tensors: Any, inputs: Any, run: Callable[[], Any]) -> None:
        """A backward before the one checked: run and kept (base run), or replayed from the
        base run's gradients (moved runs), so that what it feeds (an optimizer step) is
        the same in all three runs and only the moved tensors' later uses differ."""
        leaves = leaves_of(tensors, inputs)
        if self.replay is None:
            run()
            self.events.append([None if leaf.grad is None else leaf.grad.detach().clone() for leaf in leaves])
            return None
        kept = self.replay[self.calls - 1] if self.calls - 1 < len(self.replay) else None
        if kept is None or len(kept) != len(leaves) or any(
                g is not None and (g.shape != leaf.shape or g.dtype != leaf.dtype) for g, leaf in zip(kept, leaves)):
            self.error = f"backward {self.calls} reached other tensors than in the unmoved run"
            raise _Stop
        with torch.no_grad():
            for leaf, kept_grad in zip(leaves, kept):
                leaf.grad = None if kept_grad is None else kept_grad.clone()
        return None

    def _earlier_grad(self, run: Callable[[], Any]) -> Any:
        """``torch.autograd.grad`` before the one checked: its answer kept or replayed."""
        if self.replay is None:
            answer = run()
            self.events.append([None if g is None else g.detach().clone() for g in answer])
            return answer
        kept = self.replay[self.calls - 1] if self.calls - 1 < len(self.replay) else None
        if kept is None:
            self.error = f"autograd.grad call {self.calls} was not made in the unmoved run"
            raise _Stop
        return tuple(None if g is None else g.clone() for g in kept)

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()


def _outputs_loss(perturbation: Perturbation, result: Any, iter_tensors: Callable[[Any], Any]) -> None:
    """For a unit that never called backward: its floating outputs, randomly weighted."""
    outputs = [t for t in iter_tensors(result) if t.is_floating_point()]
    if not outputs:
        perturbation.error = "the unit neither calls backward nor returns a floating-point tensor"
        return
    generator = torch.Generator().manual_seed(perturbation.seed)
    weights = [torch.randn(t.shape, generator=generator, dtype=torch.float64).to(device=t.device, dtype=t.dtype) for t in outputs]
    try:
        perturbation.capture(outputs, weights)
    except _Stop:
        pass


def _one_run(run_once: Callable[[Perturbation], Any], eps: float, analytic: bool, iter_tensors: Callable[[Any], Any],
             **options: Any) -> Perturbation:
    perturbation = Perturbation(eps, seed=1234, analytic=analytic, **options)
    perturbation.install()
    result: Any = None
    stopped = False
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            result = run_once(perturbation)
    except _Stop:
        stopped = True
    except SystemExit as exc:
        if exc.code not in (None, 0):
            perturbation.error = f"it exited with sys.exit({exc.code!r}) before any backward"
    except BaseException as exc:  # noqa: BLE001 - user code's KeyboardInterrupt is just its exception
        perturbation.error = f"it raised {type(exc).__name__} before any backward: {str(exc)[:200]}"
    finally:
        perturbation.uninstall()
    if not stopped and perturbation.error is None and perturbation.at == 1 and not perturbation.window_backwards:
        _outputs_loss(perturbation, result, iter_tensors)
    return perturbation


def directional_check(run_once: Callable[[Perturbation], Any], iter_tensors: Callable[[Any], Any]) -> dict[str, Any]:
    """Autograd's directional derivative of the first loss against central differences.

    `run_once(perturbation)` runs the unit once (it may call ``perturbation.perturb`` on
    its own tensor inputs) and returns the unit's result."""
    started = time.perf_counter()
    base = _one_run(run_once, 0.0, True, iter_tensors)
    took = time.perf_counter() - started
    if base.error is not None or base.loss is None or base.derivative is None:
        return {"applicable": False, "detail": f"finite differences not applicable: {base.error or 'no loss was computed'}"}
    if base.loss_dtype != torch.float64:
        return {"applicable": False, "detail": f"finite differences not applicable: the loss is {base.loss_dtype} even with float64 as the default dtype"}
    if not base.targets:
        return {"applicable": False, "detail": "finite differences not applicable: no parameter or input tensor to move"}
    if took > FD_RERUN_BUDGET_S:
        return {"applicable": False, "detail": f"finite differences not applicable: a run up to the first backward takes {took:.1f} s (budget {FD_RERUN_BUDGET_S:g} s)"}
    plus = _one_run(run_once, FD_EPS, False, iter_tensors)
    minus = _one_run(run_once, -FD_EPS, False, iter_tensors)
    if plus.loss is None or minus.loss is None:
        problem = plus.error or minus.error or "a perturbed run computed no loss"
        return {"applicable": False, "detail": f"finite differences not applicable: the perturbed run failed ({problem})"}
    numeric = (plus.loss - minus.loss) / (2 * FD_EPS)
    analytic = base.derivative
    passed = abs(analytic - numeric) <= FD_ATOL + FD_RTOL * abs(numeric)
    params = sum(1 for name in base.targets if not name.startswith("arg"))
    inputs = len(base.targets) - params
    scope = f"{params} parameter tensor(s)" + (f", {inputs} input(s)" if inputs else "")
    verb = "matches" if passed else "does not match"
    return {
        "applicable": True,
        "passed": passed,
        "analytic": analytic,
        "numeric": numeric,
        "targets": sorted(base.targets),
        "detail": f"gradient along a random direction {analytic:.6g} {verb} finite differences {numeric:.6g} (float64, {scope})",
    }


def second_point(run_once: Callable[[Perturbation], Any], iter_tensors: Callable[[Any], Any]) -> dict[str, Any]:
    """The unit's first loss (or weighted outputs) at a second point: parameters and
    tensor inputs moved, seeds shifted, the same on both sides (see the module docstring)."""
    moved = _one_run(run_once, SECOND_POINT_SCALE, False, iter_tensors, float64=False, relative=True,
                     run_seed=SECOND_POINT_SEED_SHIFT, window=True)
    if moved.error is not None or moved.loss is None:
        return {"applicable": False, "detail": f"no second point: {moved.error or 'no loss was computed'}"}
    params = sum(1 for name in moved.targets if not name.startswith("arg"))
    # `loss`: the first loss; `window_loss`: the sum of the losses backpropagated before
    # the first step (the first loss where the unit never called backward)
    window = moved.window_loss if moved.window_backwards else moved.loss
    return {"applicable": True, "loss": moved.loss, "window_loss": window, "backwards": moved.window_backwards,
            "window_end": moved.window_end, "moved": params, "inputs": len(moved.targets) - params}


def later_backward_checks(run_once: Callable[[Perturbation], Any], iter_tensors: Callable[[Any], Any]) -> list[dict[str, Any]]:
    """The directional check at the second and third backward of the run (`LATER_BACKWARDS`).

    A GAN or a VAE with a discriminator calls backward more than once per step, and a
    rewrite that cuts a path of the second loss (``D(fake).detach()`` instead of
    ``D(fake.detach())``) leaves the first loss, and its check, untouched. L is now the
    loss of backward k; theta, the tensors nothing changed in place before it (the base
    run's version counters: what an optimizer stepped in between is left out, since
    autograd's gradient is taken at its new value). The moved runs move only those, from
    their first use on, and replay the earlier backwards' gradients from the base run, so
    every step before backward k is the same in all three runs and the central
    difference sees exactly the moved tensors' uses in loss k, including values computed
    before an earlier backward and reused (a score kept from the first stage), which a
    detach would hide from autograd. Only the tensors of the optimizer that steps right
    after backward k are moved: what that loss is meant to train (a discriminator's
    loss over ``fake.detach()`` rightly ignores the generator, stepped or not). A run that
    ends before backward k, or where no optimizer steps after it, or every tensor it
    reaches was stepped, gives no entry past that point; never a pass."""
    checks: list[dict[str, Any]] = []
    for at in LATER_BACKWARDS:
        started = time.perf_counter()
        base = _one_run(run_once, 0.0, True, iter_tensors, at=at)
        took = time.perf_counter() - started
        if base.calls < at:
            break  # the run ended before backward `at`
        where = f"at backward {at}"
        if base.error is None and base.trained is not None and not base.trained:
            base.error = "the optimizer that steps after it updates none of the tensors unchanged before it"
        elif base.error is None and base.trained is None:
            base.error = f"no optimizer stepped after backward {at}"
        if base.error is not None or base.loss is None or base.derivative is None:
            checks.append({"backward": at, "applicable": False, "detail": f"finite differences {where} not applicable: {base.error or 'no loss was computed'}"})
            if not base.unchanged:
                break
            continue
        if base.loss_dtype != torch.float64 or took > FD_RERUN_BUDGET_S:
            why = f"the loss is {base.loss_dtype}" if base.loss_dtype != torch.float64 else f"a run up to it takes {took:.1f} s"
            checks.append({"backward": at, "applicable": False, "detail": f"finite differences {where} not applicable: {why}"})
            break
        only = frozenset(base.trained or ())
        plus = _one_run(run_once, FD_EPS, False, iter_tensors, at=at, only=only, replay=base.events)
        minus = _one_run(run_once, -FD_EPS, False, iter_tensors, at=at, only=only, replay=base.events)
        if plus.loss is None or minus.loss is None:
            problem = plus.error or minus.error or "a moved run computed no loss"
            checks.append({"backward": at, "applicable": False, "detail": f"finite differences {where} not applicable: {problem}"})
            continue
        numeric = (plus.loss - minus.loss) / (2 * FD_EPS)
        analytic = base.derivative
        passed = abs(analytic - numeric) <= FD_ATOL + FD_RTOL * abs(numeric)
        verb = "matches" if passed else "does not match"
        checks.append({
            "backward": at,
            "applicable": True,
            "passed": passed,
            "analytic": analytic,
            "numeric": numeric,
            "targets": sorted(only),
            "detail": f"{where}, gradient along a random direction {analytic:.6g} {verb} finite differences {numeric:.6g} "
                      f"(float64, the {len(only)} tensor(s) the next step updates)",
        })
    return checks
