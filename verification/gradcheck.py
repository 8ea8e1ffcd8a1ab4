"""Custom ``torch.autograd.Function`` units: synthesized inputs, gradcheck, ctx leaks.

Runs inside a run child. ``gradcheck`` needs float64 (with float32 a correct Function
fails: its defaults are eps=1e-6, atol=1e-5, rtol=1e-3), so tensor inputs are float64
with ``requires_grad=True``. What each ``forward`` parameter takes is decided by, in order:
its default, its annotation, how forward uses it (function_inputs: a size tuple, an int,
an index tensor, a tensor), then its name (``scale``, ``dim``, ``inplace``... read as a
number or a flag); everything else is a tensor. Shapes are tried in order (all tensors
``(3, 3)``, then ``(3,)``, then ``(2, 3, 4)``, each also with one tensor a dimension
short) until forward and backward run; values stay away from 0 (kinks of relu/abs) and,
if ``forward`` yields NaN (sqrt/log), are made positive.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import torch

from .binding import _BOOL, _FLOAT, _INT
from .function_inputs import index_tensor, parameter_kinds, shape_variants

SHAPES = ((3, 3), (3,), (2, 3, 4))
#: last name tokens of a coefficient held as a tensor (gradient reversal's ``alpha_``, a
#: temperature): such a tensor is a constant, not an input autograd wants a gradient for
COEFFICIENT_NAMES = frozenset({"alpha", "lambda", "lam", "lambd", "coef", "coeff", "factor", "temperature", "temp", "tau", "scale"})


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


def _non_tensor_value(param: inspect.Parameter, kind: str | None, shape: tuple[int, ...]) -> tuple[bool, Any]:
    """(True, value) for a parameter that takes no grad-requiring tensor. A default or an
    annotation is the author's word; then what forward does with it; then its name."""
    if param.default is not inspect.Parameter.empty:
        return True, param.default
    lowered = param.name.lower()
    annotation = param.annotation
    if kind == "size":
        return True, tuple(shape)
    int_named = _INT.search(lowered) and annotation is inspect.Parameter.empty and lowered not in ("k",)
    if annotation in (int, "int") or kind == "int" or (kind is None and int_named):
        return True, 0 if re.search(r"dim|axis", lowered) else 2
    if annotation in (float, "float") or (kind is None and _FLOAT.search(lowered) and annotation is inspect.Parameter.empty):
        return True, 0.5
    if annotation in (bool, "bool") or (kind is None and _BOOL.search(lowered)):
        return True, False
    return False, None


def _constant_tensor(param: inspect.Parameter, kind: str | None, shape: tuple[int, ...], device: str) -> torch.Tensor | None:
    """A tensor argument autograd asks no gradient for: an index (``index_add_``'s
    ``ranks``), or a tensor named like a hyperparameter (``alpha_`` saved for backward:
    a coefficient held as a tensor, as ``torch.tensor(alpha, requires_grad=False)``)."""
    if kind == "index":
        return index_tensor(shape, device)
    tokens = [t for t in param.name.lower().split("_") if t]
    if kind == "tensor" and tokens and tokens[-1] in COEFFICIENT_NAMES:
        return torch.tensor(0.5, dtype=torch.float64, device=device)
    return None


def _candidate(params: list[inspect.Parameter], kinds: dict[str, str], shape: tuple[int, ...], shapes: dict[str, tuple[int, ...]] | None,
               positive: bool, device: str) -> tuple[list[Any], list[str]]:
    """One set of arguments; tensor values come from their own generator, so a candidate
    is the same whichever candidates were tried before it (both versions get equal inputs)."""
    generator = torch.Generator().manual_seed(0)
    args: list[Any] = []
    names: list[str] = []
    for param in params:
        kind = kinds.get(param.name)
        fixed, value = _non_tensor_value(param, kind, shape)
        if fixed:
            args.append(value)
            continue
        constant = _constant_tensor(param, kind, shape, device)
        if constant is not None:
            args.append(constant)
            continue
        own = (shapes or {}).get(param.name, shape)
        t = torch.randn(own, generator=generator, dtype=torch.float64).to(device)
        t = t.abs() + 0.5 if positive else t + 0.2 * torch.sign(t)
        args.append(t.requires_grad_(True))
        names.append(param.name)
    return args, names


def _tensor_parameters(params: list[inspect.Parameter], kinds: dict[str, str], shape: tuple[int, ...]) -> list[str]:
    return [
        p.name for p in params
        if not _non_tensor_value(p, kinds.get(p.name), shape)[0] and _constant_tensor(p, kinds.get(p.name), shape, "cpu") is None
    ]


def _try(cls: type, args: list[Any]) -> tuple[str | None, bool]:
    """(why forward is refused or None, whether a backward through it also runs). The
    run's RNG is left as it was (a forward drawing noise must not shift the run)."""
    with rng_fork():
        torch.manual_seed(0)
        try:
            with torch.no_grad():
                out = cls.apply(*args)
        except Exception as exc:  # noqa: BLE001
            return f"{type(exc).__name__}: {exc}", False
        outs = _as_tuple(out)
        if any(isinstance(o, torch.Tensor) and o.is_floating_point() and bool(torch.isnan(o).any()) for o in outs):
            return "NaN output", False
        leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        try:
            torch.manual_seed(0)
            outputs = [o for o in _outputs_of(cls.apply(*args)) if o.requires_grad]
            if outputs and leaves:
                torch.autograd.grad(sum(o.sum() for o in outputs), leaves, allow_unused=True)
            return None, True
        except Exception:  # noqa: BLE001 - the original's backward may be the bug being fixed
            return None, False


def _describe(params: list[inspect.Parameter], args: list[Any]) -> str:
    def one(value: Any) -> str:
        if isinstance(value, torch.Tensor):
            prefix = "index " if not value.is_floating_point() else "" if value.requires_grad else "constant "
            return f"{prefix}tensor{list(value.shape)}"
        return repr(value)

    return ", ".join(f"{p.name}={one(a)}" for p, a in zip(params, args))


def synthesize(cls: type, *, device: str = "cpu") -> tuple[list[Any], list[str], str]:
    """Arguments for ``cls.apply``, the names of tensor arguments, and a description.

    Each parameter's kind comes from forward's own use of it (function_inputs). Candidate
    shapes (SHAPES, each with the variants of ``shape_variants``) are tried in order, signed
    values before positive ones; the first whose forward *and* backward run is taken, else
    the first whose forward runs (the original's backward may be the bug being fixed)."""
    params = forward_parameters(cls)
    kinds = parameter_kinds(cls, [p.name for p in params])
    errors: list[str] = []
    fallback: tuple[list[Any], list[str]] | None = None
    for positive in (False, True):
        for shape in SHAPES:
            for shapes in shape_variants(shape, _tensor_parameters(params, kinds, shape)):
                args, names = _candidate(params, kinds, shape, shapes, positive, device)
                refused, backward_runs = _try(cls, args)
                if refused is not None:
                    errors.append(f"{shape}: {refused}")
                    continue
                if backward_runs:
                    return args, names, _describe(params, args)
                fallback = fallback or (args, names)
    if fallback is not None:
        return fallback[0], fallback[1], _describe(params, fallback[0])
    raise ValueError("no synthesized inputs accepted by forward: " + "; ".join(dict.fromkeys(errors[:3])))


def run_gradcheck(cls: type, args: list[Any]) -> dict[str, Any]:
    """``torch.autograd.gradcheck`` over the tensor arguments, non-tensors held fixed."""
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]
    inputs = tuple(args[i].detach().clone().requires_grad_(True) for i in positions)

    def fn(*tensors: torch.Tensor):
        full = list(args)
        for index, tensor in zip(positions, tensors):
            full[index] = tensor
        # one noise draw for every evaluation: a forward that samples (``normal_()``)
        # is a function of its inputs only with the generator reset
        with rng_fork():
            torch.manual_seed(0)
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
            try:
                cls.backward(ctx, *grads)
            except Exception as again:  # noqa: BLE001 - the rewrite did not mend it
                report["rewritten_error"] = f"{type(again).__name__}: {str(again)[:200]}"
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
