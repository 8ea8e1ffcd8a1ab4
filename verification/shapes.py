"""Candidate input shapes for a synthesized batch, from the layers a tensor reaches first.

Why candidates and not one shape: a model's first layer fixes the feature size, but not
what comes after it (a Conv2d followed by a Linear after ``flatten`` only fits one spatial
size), nor which layer the forward really uses first (``self.head`` may be defined before
``self.embed``). So the binder gets a short, ordered list of plans, tries them against the
model, and the worker tries the next ones when the original unit still raises a shape
error. Every plan respects the caps below, so that no unit runs for seconds on made-up
data.

Pure functions of the model and the source text: both sides of a patch compute the same
list, so a plan index means the same tensors on both.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import torch
from torch import nn

#: caps on synthesized data ("unless the model needs more" only for spatial sizes)
MAX_BATCH = 4
MAX_SEQUENCE = 16
MAX_SPATIAL = 64
NEEDED_SPATIAL = 224
MAX_ELEMENTS = 1 << 20
MAX_PLANS = 6
LARGE_BATCH = 2

SEQUENCE = 8
#: a position embedding of shape (1, T, D) fixes T; longer ones are not worth the time
MAX_HINTED_SEQUENCE = 256
FEATURES = 8
#: spatial sizes tried for convolutions, in order: small common sizes first, MNIST's 28
#: first for single-channel inputs, 224 (ImageNet) only when nothing smaller fits
_SPATIAL_2D = (32, 64, 28, NEEDED_SPATIAL)
_SPATIAL_2D_GRAY = (28, 32, 64, NEEDED_SPATIAL)
_SPATIAL_1D = (32, 64, 16)
_SPATIAL_3D = (16, 32, 8)
_SPATIAL_TRANSPOSED = (1, 4, 8, 16)


@dataclass(frozen=True)
class Plan:
    """One candidate input: its shape, whether it holds integer ids, and why."""

    shape: tuple[int, ...]
    why: str
    high: int | None = None  # exclusive upper bound of integer ids (Embedding inputs)

    @property
    def integer(self) -> bool:
        return self.high is not None

    def build(self, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        if self.high is not None:
            return torch.randint(0, max(self.high, 1), self.shape, device=device)
        return torch.randn(*self.shape, device=device, dtype=dtype)

    def describe(self) -> str:
        kind = f"ids below {self.high}" if self.high is not None else "float"
        return f"{list(self.shape)} {kind} ({self.why})"


def capped(shape: tuple[int, ...], batch_dim: int = 0) -> tuple[int, ...] | None:
    """`shape` with its batch shrunk until it holds at most MAX_ELEMENTS; None if it cannot."""
    sizes = list(shape)
    sizes[batch_dim] = min(sizes[batch_dim], MAX_BATCH)
    while math.prod(sizes) > MAX_ELEMENTS and sizes[batch_dim] > 1:
        sizes[batch_dim] //= 2
    return tuple(sizes) if math.prod(sizes) <= MAX_ELEMENTS else None


# -- which layers a tensor reaches first --------------------------------------------------
_ENTRY_TYPES = (
    nn.Linear, nn.Bilinear, nn.modules.conv._ConvNd, nn.Embedding, nn.EmbeddingBag, nn.RNNBase, nn.LayerNorm,
    nn.modules.batchnorm._BatchNorm, nn.MultiheadAttention, nn.TransformerEncoderLayer, nn.TransformerDecoderLayer,
)


def forwards(source: str) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Each class's ``forward`` in `source`, by class name (empty if it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    return forwards_in(tree)


def forwards_in(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """`forwards` of an already parsed module (a binder parses its source once)."""
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    # classes live at module level, in classes, or under an if/try/with: function
    # bodies (most of a large file) are not walked, each run asks this again
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) or isinstance(node, ast.expr):
            continue
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == "forward":
                    found.setdefault(node.name, item)
        pending.extend(reversed(list(ast.iter_child_nodes(node))))
    return found


def _calls_in_evaluation_order(node: ast.AST) -> Iterator[ast.Call]:
    """Calls as Python evaluates them: arguments before the call that receives them
    (``self.head(self.embed(x))`` yields ``self.embed(...)`` first)."""
    if isinstance(node, ast.Call):
        for arg in node.args:
            yield from _calls_in_evaluation_order(arg)
        for keyword in node.keywords:
            yield from _calls_in_evaluation_order(keyword.value)
        yield from _calls_in_evaluation_order(node.func)
        yield node
        return
    for child in ast.iter_child_nodes(node):
        yield from _calls_in_evaluation_order(child)


def _self_attribute(func: ast.expr) -> str | None:
    """``self.x`` or ``self.x[0]`` as the callee: the attribute name."""
    if isinstance(func, ast.Subscript):
        func = func.value
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        return func.attr
    return None


def entry_layers(
    model: nn.Module, source: str, forward_defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None
) -> list[nn.Module]:
    """Layers that may receive the input first: in the order the forward in `source`
    calls them, then in registration order (the fallback when the forward is not in
    `source`, e.g. a library model). Duplicates removed."""
    found = _forward_order(model, forwards(source) if forward_defs is None else forward_defs, 0)
    found.extend(layer for layer in model.modules() if isinstance(layer, _ENTRY_TYPES))
    unique: list[nn.Module] = []
    for layer in found:
        if not any(layer is seen for seen in unique):
            unique.append(layer)
    return unique


def _forward_order(model: nn.Module, known: dict[str, ast.FunctionDef | ast.AsyncFunctionDef], depth: int) -> list[nn.Module]:
    if isinstance(model, _ENTRY_TYPES):
        return [model]
    forward = known.get(type(model).__name__) if depth < 4 else None
    if forward is None:
        # a container or library module: its registration order is its call order
        return [layer for layer in model.modules() if isinstance(layer, _ENTRY_TYPES)][:2]
    found: list[nn.Module] = []
    for call in _calls_in_evaluation_order(forward):
        attr = _self_attribute(call.func)
        try:
            sub = getattr(model, attr, None) if attr else None
        except Exception:  # noqa: BLE001 - a property that raises is not a layer
            sub = None
        if isinstance(sub, nn.ModuleList) and len(sub):
            sub = sub[0]
        if isinstance(sub, nn.Module):
            found.extend(_forward_order(sub, known, depth + 1)[:2])
        if len(found) >= MAX_PLANS:
            break
    return found


# -- plans ------------------------------------------------------------------------------------
def _conv_plans(layer: nn.modules.conv._ConvNd) -> Iterator[Plan]:
    dims = len(layer.kernel_size)
    channels = layer.in_channels
    if getattr(layer, "transposed", False):
        sizes = _SPATIAL_TRANSPOSED  # a generator's latent: 1x1 grows to an image
    elif dims == 1:
        sizes = _SPATIAL_1D
    elif dims == 2:
        sizes = _SPATIAL_2D_GRAY if channels == 1 else _SPATIAL_2D
    else:
        sizes = _SPATIAL_3D
    for size in sizes:
        # a larger image than the cap allows is run two at a time
        batch = MAX_BATCH if size <= MAX_SPATIAL else LARGE_BATCH
        shape = capped((batch, channels, *([size] * dims)))
        if shape is not None:
            yield Plan(shape, f"{type(layer).__name__} in_channels={channels}, size {size}")


def _sequence_shape(features: int, batch_first: bool, sequence: int) -> tuple[int, ...] | None:
    if batch_first:
        return capped((MAX_BATCH, sequence, features))
    return capped((sequence, MAX_BATCH, features), batch_dim=1)


def sequence_length(model: nn.Module) -> int:
    """The sequence length the model fixes through a position embedding shaped
    (1, T, D) (ViT, GPT), else the default."""
    for module in model.modules():
        if isinstance(module, _ENTRY_TYPES):
            continue  # a layer's own weights (a Conv1d(16, 1, 3) weight is (1, 16, 3)) say nothing
        for tensor in list(module.parameters(recurse=False)) + list(module.buffers(recurse=False)):
            if tensor.dim() == 3 and tensor.shape[0] == 1 and 1 < tensor.shape[1] <= MAX_HINTED_SEQUENCE:
                return int(tensor.shape[1])
    return SEQUENCE


def layer_plans(layer: nn.Module, sequence: int = SEQUENCE) -> Iterator[Plan]:
    """Inputs that fit `layer`, most likely first (`sequence`: the length of sequences)."""
    name = type(layer).__name__
    shape: tuple[int, ...] | None
    if isinstance(layer, nn.Linear):
        shape = capped((MAX_BATCH, layer.in_features))
        if shape:
            yield Plan(shape, f"{name} in_features={layer.in_features}")
        shape = capped((MAX_BATCH, sequence, layer.in_features))
        if shape:
            yield Plan(shape, f"{name} in_features={layer.in_features}, as a sequence")
    elif isinstance(layer, nn.Bilinear):
        shape = capped((MAX_BATCH, layer.in1_features))
        if shape:
            yield Plan(shape, f"{name} in1_features={layer.in1_features}")
    elif isinstance(layer, nn.modules.conv._ConvNd):
        yield from _conv_plans(layer)
    elif isinstance(layer, (nn.Embedding, nn.EmbeddingBag)):
        yield Plan((MAX_BATCH, sequence), f"{name} num_embeddings={layer.num_embeddings}", high=layer.num_embeddings)
    elif isinstance(layer, nn.RNNBase):
        shape = _sequence_shape(layer.input_size, layer.batch_first, sequence)
        if shape:
            order = "batch_first" if layer.batch_first else "sequence first"
            yield Plan(shape, f"{name} input_size={layer.input_size}, {order}")
    elif isinstance(layer, (nn.MultiheadAttention, nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
        attention = layer if isinstance(layer, nn.MultiheadAttention) else layer.self_attn
        shape = _sequence_shape(attention.embed_dim, bool(getattr(attention, "batch_first", False)), sequence)
        if shape:
            yield Plan(shape, f"{name} embed_dim={attention.embed_dim}")
    elif isinstance(layer, nn.LayerNorm):
        normalized = tuple(layer.normalized_shape)
        for shape in (capped((MAX_BATCH, *normalized)), capped((MAX_BATCH, sequence, *normalized))):
            if shape:
                yield Plan(shape, f"{name} normalized_shape={list(normalized)}")
    elif isinstance(layer, nn.modules.batchnorm._BatchNorm):
        features = layer.num_features
        if isinstance(layer, nn.BatchNorm1d):
            shapes = [(MAX_BATCH, features), (MAX_BATCH, features, 32)]
        elif isinstance(layer, nn.BatchNorm3d):
            shapes = [(MAX_BATCH, features, 16, 16, 16)]
        else:
            shapes = [(MAX_BATCH, features, 32, 32), (MAX_BATCH, features, 64, 64)]
        for raw in shapes:
            shape = capped(raw)
            if shape:
                yield Plan(shape, f"{name} num_features={features}")


def model_plans(
    model: nn.Module, source: str, forward_defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None
) -> list[Plan]:
    """At most MAX_PLANS candidate inputs for `model`: each entry layer's best plan
    first (the forward's own first layer wins), then their alternatives."""
    sequence = sequence_length(model)
    per_layer = [list(layer_plans(layer, sequence)) for layer in entry_layers(model, source, forward_defs)]
    per_layer = [plans for plans in per_layer if plans]
    ordered: list[Plan] = []
    if per_layer:
        # the first layer's plans all come first (its spatial sizes are the likeliest fix),
        # then the other layers' first choices, then their alternatives
        ordered.extend(per_layer[0])
        ordered.extend(plans[0] for plans in per_layer[1:])
        ordered.extend(plan for plans in per_layer[1:] for plan in plans[1:])
    ordered.append(Plan((MAX_BATCH, FEATURES), "no known first layer"))
    unique: list[Plan] = []
    for plan in ordered:
        if all((plan.shape, plan.high) != (seen.shape, seen.high) for seen in unique):
            unique.append(plan)
    return unique[:MAX_PLANS]


# -- plain tensors (no model) ---------------------------------------------------------------
#: layouts for functions of plain tensors: (name, shape of the first tensor, of the others)
TENSOR_LAYOUTS: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...] = (
    ("by use", (MAX_BATCH, FEATURES), (MAX_BATCH, FEATURES)),
    ("all alike", (MAX_BATCH, FEATURES), (MAX_BATCH, FEATURES)),
    ("then square matrices", (MAX_BATCH, FEATURES), (FEATURES, FEATURES)),
    ("then vectors", (MAX_BATCH, FEATURES), (FEATURES,)),
    ("all sequences", (MAX_BATCH, SEQUENCE, FEATURES), (MAX_BATCH, SEQUENCE, FEATURES)),
    ("all square matrices", (FEATURES, FEATURES), (FEATURES, FEATURES)),
)


#: at most this many of a module's own feature sizes become extra layouts
MAX_MODULE_SIZES = 3

Layout = tuple[str, tuple[int, ...], tuple[int, ...]]


def module_feature_sizes(module: nn.Module) -> list[int]:
    """Feature sizes a module's own layers take or give, first seen first: a method of
    the module that mixes a plain tensor with them (``torch.bmm(x, self.attn(h))``, a
    context fed to ``self.fc``) needs one of them as that tensor's last axis."""
    sizes: list[int] = []
    for layer in module.modules():
        if isinstance(layer, nn.Linear):
            found = [layer.in_features, layer.out_features]
        elif isinstance(layer, (nn.RNNBase, nn.RNNCellBase)):
            found = [layer.input_size, layer.hidden_size]
        elif isinstance(layer, nn.LayerNorm) and layer.normalized_shape:
            found = [layer.normalized_shape[-1]]
        else:
            continue
        for size in found:
            if size not in sizes and size != FEATURES and 1 < size <= MAX_SEQUENCE * FEATURES:
                sizes.append(int(size))
    return sizes[:MAX_MODULE_SIZES]


def tensor_layouts(module_sizes: Sequence[int] = ()) -> tuple[Layout, ...]:
    """The plain-tensor layouts to try in order: "by use" with the default features,
    then "by use" with each of the unit's module's own feature sizes, then the rest."""
    first, *rest = TENSOR_LAYOUTS
    extra = tuple((f"by use, {size} features", (MAX_BATCH, size), (MAX_BATCH, size)) for size in module_sizes)
    return (first, *extra, *rest)


def tensor_shape(layout: int, position: int, matrix_use: bool, layouts: Sequence[Layout] = TENSOR_LAYOUTS) -> tuple[int, ...]:
    """Shape of the `position`-th plain tensor under `layout`; `matrix_use` (the body
    multiplies by it as a matrix) only matters for the "by use" layouts."""
    name, first, others = layouts[layout]
    if position == 0:
        return first
    if name.startswith("by use") and matrix_use:
        return (first[-1], first[-1])
    return others


def with_rank(tensor: torch.Tensor, rank: int) -> torch.Tensor:
    """`tensor` grown to `rank` dimensions by sequence axes after the batch axis:
    ``(batch, features)`` becomes ``(batch, SEQUENCE, features)`` for a body that reads
    ``x.size(2)`` or multiplies batches of matrices. Fresh values, same dtype and device."""
    shape = list(tensor.shape)
    while len(shape) < rank:
        shape.insert(1, SEQUENCE)
    return torch.randn(*shape, device=tensor.device, dtype=tensor.dtype) if tensor.is_floating_point() else tensor.new_zeros(shape)


def with_stepped_axes(tensor: torch.Tensor, axes: set[int]) -> torch.Tensor:
    """`tensor` with each of `axes` at least `SEQUENCE` long: a body that steps along an
    axis (``y[:, t : t + 1]`` for each time step) gets a window to step through, where a
    layer's width of 1 would leave it empty after the first step."""
    shape = list(tensor.shape)
    grown = [axis for axis in axes if axis < len(shape) and shape[axis] < SEQUENCE]
    if not grown:
        return tensor
    for axis in grown:
        shape[axis] = SEQUENCE
    return torch.randn(*shape, device=tensor.device, dtype=tensor.dtype) if tensor.is_floating_point() else tensor.new_zeros(shape)


def run_sliced(seconds: float, fn: Callable[[], object]) -> object:
    """`fn()`, stopped with `SliceExpired` after `seconds` (main thread only, where
    signals can interrupt; elsewhere it simply runs)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return fn()

    def expire(signum, frame):  # noqa: ARG001 - signal handler signature
        raise SliceExpired(f"over its {seconds:g} s slice")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class SliceExpired(BaseException):
    """A trial ran past its time slice (a BaseException, so user code's
    ``except Exception`` cannot swallow it)."""
