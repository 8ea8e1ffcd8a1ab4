"""Run code in float64 whatever dtypes it asks for: the finite-difference re-runs need it.

Why: ``torch.set_default_dtype(torch.float64)`` changes only factories called without a
dtype. Tensors a script makes itself keep theirs: ``torch.randint(...).float()``,
``torch.tensor(x, dtype=torch.float32)``, ``torch.from_numpy(a.astype(np.float32))``.
Next to float64 parameters they raise ("Found dtype Float but expected Double" in
``binary_cross_entropy``, "mat1 and mat2 must have the same dtype" in a ``Linear``), so
a check that needs float64 could not run, and a right fix was rejected for want of it.

`Float64Mode` is a ``torch.overrides.TorchFunctionMode`` (public; it sees every torch
function and tensor method the code calls, above autograd, so the casts it adds are
part of the graph and gradients flow through them):

* a floating dtype below float64 asked for (``dtype=torch.float32``, ``x.to(torch.half)``,
  ``x.type(torch.FloatTensor)``) becomes float64; ``.float()``, ``.half()`` and
  ``.bfloat16()`` become ``.double()``;
* a function that makes a new tensor from data (``torch.tensor``, ``torch.as_tensor``)
  returns float64 when it would have returned a lower floating precision;
* every other call that does not write into its arguments gets its lower-precision
  floating tensor arguments as float64 copies (a ``from_numpy`` float32 array meets
  float64 weights), so the result is float64.

Left alone, so that what aliases what stays as the code wrote it: in-place methods
(``x.add_``, ``x[i] = v``, ``x += v``) and ``out=`` calls write into their own tensors (a
float32 tensor written in place stays float32, which torch allows), and attribute reads
(``x.data``, ``x.T``) return views. Not reached: ``torch.from_numpy`` itself (torch does
not route it through modes); its tensor is cast where an operation uses it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

_LOW = frozenset({torch.float32, torch.float16, torch.bfloat16})
_LOW_TENSOR_TYPES = frozenset({"torch.FloatTensor", "torch.HalfTensor", "torch.BFloat16Tensor"})
#: methods that cast to a lower floating precision, and what they become
_CASTS = {"float": "double", "half": "double", "bfloat16": "double"}
#: functions that build a new tensor from data (no tensor argument to cast)
_FROM_DATA = frozenset({"tensor", "as_tensor"})


def _name(func: Any) -> str:
    return getattr(func, "__name__", "") or ""


def _writes_in_place(name: str, kwargs: dict[str, Any]) -> bool:
    if kwargs.get("out") is not None:
        return True
    if name.startswith("__") and name.endswith("__"):
        return name in ("__setitem__", "__set__") or name.startswith("__i")
    return name.endswith("_")


def _upcast(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype in _LOW:
        return value.to(torch.float64)
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) and v.dtype in _LOW for v in value):
        return type(value)(_upcast(v) for v in value) if not hasattr(value, "_fields") else value
    return value


def _wider(value: Any) -> Any:
    """A lower floating dtype (or legacy tensor type name) replaced by float64's."""
    if isinstance(value, torch.dtype) and value in _LOW:
        return torch.float64
    if isinstance(value, str) and value in _LOW_TENSOR_TYPES:
        return "torch.DoubleTensor"
    if isinstance(value, type) and getattr(value, "__module__", "") == "torch" and f"torch.{value.__name__}" in _LOW_TENSOR_TYPES:
        return torch.DoubleTensor
    return value


class Float64Mode(TorchFunctionMode):
    """Every floating tensor the code makes or computes is float64 (see the module docstring)."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        name = _name(func)
        if name == "__get__":
            return func(*args, **kwargs)
        if name in _CASTS and args and isinstance(args[0], torch.Tensor) and not args[0].is_complex():
            return args[0].double()
        if "dtype" in kwargs:
            kwargs["dtype"] = _wider(kwargs["dtype"])
        if name in ("to", "type"):
            args = tuple(_wider(a) for a in args)
        if _writes_in_place(name, kwargs):
            result = func(*args, **kwargs)
        else:
            result = func(*(_upcast(a) for a in args), **{k: _upcast(v) for k, v in kwargs.items()})
        if name in _FROM_DATA and isinstance(result, torch.Tensor) and result.dtype in _LOW:
            result = result.to(torch.float64)
        return result
