"""What a run's record may hold: plain values the job reads back without running code.

The job reads each record with ``torch.load(weights_only=True)`` (`worker._load`): the
run could write into the record's file while it lived, so unpickling must not run code,
and anything but tensors, plain Python values and a few torch types is refused ("Weights
only load failed"), which left the whole patch unverified. Values come from user code,
which returns numpy scalars (``np.mean(losses)`` is a ``numpy.float64``, a subclass of
``float`` that the refusing unpickler still names by its numpy class), namedtuples,
dataclasses of tensors, enums. So the harness carries every value across as:

* tensors: detached CPU copies (a tensor subclass as a plain tensor);
* ``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes`` of exactly those
  types (a numpy scalar or an ``int``/``float``/``str`` subclass as its plain value);
* numpy arrays: tensors (an object array: its description);
* lists and tuples (namedtuples too): ``{"__seq__": type name, "items", "length"}``;
* dicts: ``{"__dict__": {str(key): value}}``;
* modules: ``{"__module__": class name, "state": state_dict, "attrs": plain attributes}``;
* dataclasses: ``{"__object__": class name, "attrs": their fields}``, so a field that
  changes is a difference (an opaque object would compare equal);
* anything else: ``{"__object__": type name}``.

`serialize` makes an output value comparable; `plain` is the last pass over a whole
record before it is saved, so that nothing the run produced (a numpy scalar in a
probe's figures, a subclass of ``str`` in a description) makes the record unreadable.
Neither changes the record's anti-forgery design (`sandbox`): the nonce and the
nameless file still decide whether a record is evidence at all.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import torch
from torch import nn

MAX_ITEMS = 1000
MAX_DEPTH = 8
_SCALARS = (bool, int, float, complex, str, bytes)
#: torch types the weights-only unpickler reads back as themselves
_TORCH_PLAIN = (torch.device, torch.dtype, torch.Size)


def _scalar(value: Any) -> Any:
    """`value` as a plain Python scalar (exact type), or `_NOT_SCALAR`."""
    if value is None or type(value) in _SCALARS:
        return value
    if isinstance(value, enum.Enum):
        return _NOT_SCALAR
    for kind in _SCALARS:  # a subclass: np.float64, IntEnum-like counters, np.str_
        if isinstance(value, kind):
            return kind(value)
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy comes with torch here
        return _NOT_SCALAR
    if isinstance(value, numpy.generic) and not isinstance(value, numpy.void):
        item = value.item()
        return item if item is None or type(item) in _SCALARS else _NOT_SCALAR
    return _NOT_SCALAR


_NOT_SCALAR = object()


def _tensor(value: torch.Tensor) -> torch.Tensor:
    copy = value.detach().to("cpu", copy=True)
    return copy if type(copy) is torch.Tensor else copy.as_subclass(torch.Tensor)


def _ndarray(value: Any) -> Any:
    try:
        import numpy
    except ImportError:  # pragma: no cover
        return None
    if isinstance(value, numpy.ndarray):
        if value.dtype == object or value.dtype.kind not in "biufc":
            return {"__object__": "ndarray"}
        return torch.from_numpy(numpy.ascontiguousarray(value).copy())
    return None


def serialize(value: Any, depth: int = 0) -> Any:
    """A comparable, plain copy of an output value (see the module docstring)."""
    if depth > MAX_DEPTH:
        return {"__object__": type(value).__name__}
    if isinstance(value, torch.Tensor):
        return _tensor(value)
    scalar = _scalar(value)
    if scalar is not _NOT_SCALAR:
        return scalar
    if isinstance(value, (list, tuple)):
        items = [serialize(v, depth + 1) for v in list(value)[:MAX_ITEMS]]
        return {"__seq__": type(value).__name__, "items": items, "length": len(value)}
    if isinstance(value, dict):
        return {"__dict__": {str(k): serialize(v, depth + 1) for k, v in list(value.items())[:MAX_ITEMS]}}
    if isinstance(value, nn.Module):
        return {
            "__module__": type(value).__name__,
            "state": {k: _tensor(v) for k, v in value.state_dict().items()},
            # what the module keeps besides tensors (sizes, flags, an autocast context):
            # a fix must not change how it will compute
            "attrs": {k: serialize(v, depth + 1) for k, v in vars(value).items() if not k.startswith("_")},
        }
    if isinstance(value, torch.autocast):
        settings = {"device": value.device, "dtype": str(value.fast_dtype), "enabled": bool(value._enabled)}
        return {"__object__": "autocast", "attrs": settings}
    array = _ndarray(value)
    if array is not None:
        return array
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: serialize(getattr(value, f.name, None), depth + 1) for f in dataclasses.fields(value)}
        return {"__object__": type(value).__name__, "attrs": fields}
    if isinstance(value, enum.Enum):
        return {"__object__": f"{type(value).__name__}.{value.name}"}
    return {"__object__": type(value).__name__}


def plain(value: Any, depth: int = 0) -> Any:
    """`value` (a whole record) with everything the weights-only unpickler would refuse
    replaced by its plain form; containers keep their own types (dict, list, tuple)."""
    if isinstance(value, torch.Tensor):
        return value if type(value) in (torch.Tensor, nn.Parameter) else _tensor(value)
    if isinstance(value, _TORCH_PLAIN):
        return tuple(value) if isinstance(value, torch.Size) and type(value) is not torch.Size else value
    scalar = _scalar(value)
    if scalar is not _NOT_SCALAR:
        return scalar
    if depth > 4 * MAX_DEPTH:
        return {"__object__": type(value).__name__}
    if isinstance(value, dict):
        return {_key(k): plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(plain(v, depth + 1) for v in value)
    return serialize(value, depth=MAX_DEPTH)


def _key(key: Any) -> Any:
    scalar = _scalar(key)
    return scalar if scalar is not _NOT_SCALAR else str(key)
