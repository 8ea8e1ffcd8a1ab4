"""Custom ``torch.autograd.Function`` units: synthesized inputs, gradcheck, ctx leaks.

Runs inside a run child. ``gradcheck`` needs float64 (with float32 a correct Function
fails: its defaults are eps=1e-6, atol=1e-5, rtol=1e-3), so tensor inputs are float64
with ``requires_grad=True``. Which ``forward`` parameters are tensors is guessed: a
parameter with a default keeps it; names that read as numbers or flags (``scale``,
``dim``, ``inplace``...) get a number or a flag; everything else is a tensor. Shapes are
tried in order (all tensors ``(3, 3)``, then ``(3,)``, then ``(2, 3, 4)``) until
``forward`` accepts them; values stay away from 0 (kinks of relu/abs) and, if
``forward`` yields NaN (sqrt/log), are made positive.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import torch

from .binding import _BOOL, _FLOAT, _INT

SHAPES = ((3, 3), (3,), (2, 3, 4))


def autograd_function_classes(namespace: dict[str, Any]) -> list[type]:
    """Custom Function subclasses defined in the module whose namespace this is."""
    module_name = namespace.get("__name__")
    return [
        value
        for value in namespace.values()
        if isinstance(value, type)
        and issubclass(value, torch.autograd.Function)
        and value is not torch.autograd.Function
        and value.__module__ == module_name
    ]


def forward_parameters(cls: type) -> list[inspect.Parameter]:
    params = list(inspect.signature(cls.forward).parameters.values())
    uses_setup_context = getattr(cls, "setup_context", None) is not torch.autograd.Function.setup_context
    if not uses_setup_context and params:
        params = params[1:]  # ctx
    return [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def _non_tensor_value(param: inspect.Parameter) -> tuple[bool, Any]:
    if param.default is not inspect.Parameter.empty:
        return True, param.default
    lowered = param.name.lower()
    annotation = param.annotation
    if annotation in (int, "int") or (_INT.search(lowered) and annotation is inspect.Parameter.empty and lowered not in ("k",)):
        return True, 0 if re.search(r"dim|axis", lowered) else 2
    if annotation in (float, "float") or (_FLOAT.search(lowered) and annotation is inspect.Parameter.empty):
        return True, 0.5
    if annotation in (bool, "bool") or _BOOL.search(lowered):
        return True, False
    return False, None


def synthesize(cls: type, *, device: str = "cpu") -> tuple[list[Any], list[str], str]:
    """Arguments for ``cls.apply``, the names of tensor arguments, and a description."""
    params = forward_parameters(cls)
    errors = []
    for positive in (False, True):
        for shape in SHAPES:
            args: list[Any] = []
            names: list[str] = []
            for param in params:
                fixed, value = _non_tensor_value(param)
                if fixed:
                    args.append(value)
                    continue
                t = torch.randn(shape, dtype=torch.float64, device=device)
                t = t.abs() + 0.5 if positive else t + 0.2 * torch.sign(t)
                args.append(t.requires_grad_(True))
                names.append(param.name)
            try:
                with torch.no_grad():
                    out = cls.apply(*args)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{shape}: {type(exc).__name__}: {exc}")
                continue
            outs = out if isinstance(out, (tuple, list)) else (out,)
            if any(isinstance(o, torch.Tensor) and o.is_floating_point() and bool(torch.isnan(o).any()) for o in outs):
                errors.append(f"{shape}: NaN output")
                continue
            description = ", ".join(
                f"{p.name}=tensor{list(shape)}" if p.name in names else f"{p.name}={a!r}" for p, a in zip(params, args)
            )
            return args, names, description
    raise ValueError("no synthesized inputs accepted by forward: " + "; ".join(errors[:3]))


def run_gradcheck(cls: type, args: list[Any]) -> dict[str, Any]:
    """``torch.autograd.gradcheck`` over the tensor arguments, non-tensors held fixed."""
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]
    inputs = tuple(args[i].detach().clone().requires_grad_(True) for i in positions)

    def fn(*tensors: torch.Tensor):
        full = list(args)
        for index, tensor in zip(positions, tensors):
            full[index] = tensor
        return cls.apply(*full)

    try:
        torch.autograd.gradcheck(fn, inputs, raise_exception=True)
        return {"passed": True, "error": None}
    except Exception as exc:  # noqa: BLE001 - GradcheckError, RuntimeError from backward, ...
        message = str(exc).strip().splitlines()
        return {"passed": False, "error": f"{type(exc).__name__}: {' '.join(message[:3])[:400]}"}


def gradcheck_namespace(namespace: dict[str, Any]) -> list[dict[str, Any]]:
    """One report per custom Function defined in the module (for ``verify --gradcheck``)."""
    reports = []
    for cls in autograd_function_classes(namespace):
        torch.manual_seed(0)
        try:
            args, _, description = synthesize(cls)
        except ValueError as exc:
            reports.append({"name": cls.__name__, "passed": None, "error": str(exc), "inputs": None})
            continue
        result = run_gradcheck(cls, args)
        reports.append({"name": cls.__name__, "inputs": description, **result})
    return reports


# -- probing a custom Function during a run (the apply probe calls these) -------------------
#: gradcheck's float64 defaults, used for the directional derivative below
FD_EPS, FD_ATOL, FD_RTOL = 1e-6, 1e-5, 1e-3


def input_roles(args: tuple[Any, ...]) -> list[str]:
    """Per ``apply`` position: ``grad`` (a tensor that requires grad while grad mode is on,
    so autograd will ask backward for its gradient), ``tensor`` or ``other``."""
    enabled = torch.is_grad_enabled()
    return ["grad" if isinstance(a, torch.Tensor) and a.requires_grad and enabled else "tensor" if isinstance(a, torch.Tensor) else "other" for a in args]


def merge_roles(known: list[str], new: list[str]) -> list[str]:
    """Strongest role seen per position over the run (``grad`` beats ``tensor`` beats ``other``)."""
    rank = {"other": 0, "tensor": 1, "grad": 2}
    width = max(len(known), len(new))
    padded_known = known + ["other"] * (width - len(known))
    padded_new = new + ["other"] * (width - len(new))
    return [a if rank[a] >= rank[b] else b for a, b in zip(padded_known, padded_new)]


def rng_fork() -> Any:
    """``fork_rng`` over the CPU and the CUDA devices already in use (none initialised
    for the sake of it: a CPU run on a GPU machine must not pay for a CUDA context)."""
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    return torch.random.fork_rng(devices=devices)


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _outputs_of(out: Any) -> list[torch.Tensor]:
    return [t for t in _as_tuple(out) if isinstance(t, torch.Tensor)]


def _grad_outputs(outputs: list[torch.Tensor], generator: torch.Generator) -> list[torch.Tensor]:
    return [
        torch.randn(t.shape, generator=generator, dtype=torch.float64).to(device=t.device, dtype=t.dtype) if t.is_floating_point() else torch.zeros_like(t)
        for t in outputs
    ]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b) or torch.allclose(a, b, equal_nan=True))
    return type(a) is type(b) and a == b


def _zero_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0


def compare_backwards(cls: type, counterpart: type, ctx: Any, outputs: list[torch.Tensor], seed: int) -> dict[str, Any]:
    """Both versions' ``backward`` called directly on one saved context with one grad_output.

    The rewritten must return what the original returned at every position the original
    returned a gradient; what it adds after the original's last position is listed
    (``padded_none`` / ``added``) for the contract to judge against the inputs' roles.
    """
    generator = torch.Generator().manual_seed(seed)
    grads = _grad_outputs(outputs, generator)
    report: dict[str, Any] = {"mismatches": [], "padded_none": [], "added": [], "error": None}
    with torch.no_grad():
        try:
            theirs = _as_tuple(counterpart.backward(ctx, *grads))
        except Exception as exc:  # noqa: BLE001 - the original's backward may be the broken one
            report["error"] = f"the original backward raised {type(exc).__name__}: {str(exc)[:200]}"
            return report
        try:
            mine = _as_tuple(cls.backward(ctx, *grads))
        except Exception as exc:  # noqa: BLE001
            report["error"] = f"the rewritten backward raised {type(exc).__name__}: {str(exc)[:200]}"
            return report
    report["original_count"], report["count"] = len(theirs), len(mine)
    # only a tensor is a gradient: a Python `0` where autograd wants a tensor or None is
    # the original's bug, and what replaces it is judged like padding
    report["original_positions"] = [i for i, g in enumerate(theirs) if isinstance(g, torch.Tensor)]
    for position in report["original_positions"]:
        if position >= len(mine) or not _same(theirs[position], mine[position]):
            got = "nothing" if position >= len(mine) else "None" if mine[position] is None else "a different value"
            report["mismatches"].append(f"position {position}: the original returned a gradient, the rewritten {got}")
    for position in range(len(mine)):
        if position < len(theirs) and _zero_number(theirs[position]) and mine[position] is None:
            continue  # `0 -> None`: both mean a zero gradient
        if position >= len(theirs) or (theirs[position] is not None and position not in report["original_positions"]):
            report["padded_none" if mine[position] is None else "added"].append(position)
    return report


def backward_vs_finite_differences(cls: type, args: tuple[Any, ...], seed: int) -> dict[str, Any]:
    """Does ``cls.backward`` return true derivatives?  Per floating tensor input, in float64:
    ``<backward's gradient, v>`` against ``(phi(x + eps v) - phi(x - eps v)) / 2 eps`` along a
    random direction v, where phi is the forward's outputs weighted by a random grad_output
    (two extra forward passes per input). Positions backward returns None for are skipped."""
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()]
    if not positions:
        return {"positions": {}, "error": "no floating-point tensor input"}
    base = [a.detach().double() if i in positions else a for i, a in enumerate(args)]
    generator = torch.Generator().manual_seed(seed)

    def forward(values: list[Any], grad: bool) -> Any:
        # the same random numbers for every evaluation (dropout inside forward), and the
        # run's own RNG state untouched (CUDA generators included where they exist)
        with rng_fork(), torch.set_grad_enabled(grad):
            torch.manual_seed(seed)
            return cls.apply(*values)

    try:
        leaves = [a.clone().requires_grad_(True) if i in positions else a for i, a in enumerate(base)]
        out = forward(leaves, True)
        outputs = _outputs_of(out)
        weights = _grad_outputs(outputs, generator)
        ctx = next((t.grad_fn for t in outputs if t.grad_fn is not None), None)
        if ctx is None:
            return {"positions": {}, "error": "the forward output has no grad_fn in float64"}
        with torch.no_grad():
            analytic = _as_tuple(cls.backward(ctx, *weights))
        report: dict[str, Any] = {"positions": {}, "error": None}
        for position in positions:
            grad = analytic[position] if position < len(analytic) else None
            if not isinstance(grad, torch.Tensor):
                continue
            direction = torch.randn(base[position].shape, generator=generator, dtype=torch.float64).to(base[position].device)

            def phi(sign: float) -> float:
                values = list(base)
                values[position] = base[position] + sign * FD_EPS * direction
                outs = _outputs_of(forward(values, False))
                return float(sum((o.double() * w.double()).sum() for o, w in zip(outs, weights) if o.is_floating_point()))

            numeric = (phi(1.0) - phi(-1.0)) / (2 * FD_EPS)
            value = float((grad.double() * direction).sum())
            report["positions"][position] = {
                "analytic": value,
                "numeric": numeric,
                "match": abs(value - numeric) <= FD_ATOL + FD_RTOL * abs(numeric),
            }
        return report
    except Exception as exc:  # noqa: BLE001 - a Function that cannot run in float64
        return {"positions": {}, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}


def counterpart_class(source: str, name: str, globals_: dict[str, Any], path: str) -> type | None:
    """The original version of class `name`, defined from the original source's class
    statement alone in a copy of the rewritten module's globals (so the original's module
    code does not run again). None when the original has no such top-level class."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    if node is None:
        return None
    namespace = dict(globals_)
    try:
        exec(compile(ast.Module(body=[node], type_ignores=[]), f"{path} (original)", "exec"), namespace)  # noqa: S102
    except Exception:  # noqa: BLE001
        return None
    found = namespace.get(name)
    return found if isinstance(found, type) else None
