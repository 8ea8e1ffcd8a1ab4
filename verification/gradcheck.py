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
