"""What kind of value each ``forward`` parameter of a custom ``autograd.Function`` takes.

A Function verified without a driver gets synthesized arguments, and a name alone is a
weak guide: ``shape`` in ``loc.new_empty(shape)`` must be a tuple of ints, ``ranks`` in
``out.index_add_(0, ranks, feats)`` a long index tensor, and ``alpha_`` handed to
``ctx.save_for_backward`` a tensor although its name reads as a float. So the kind is
read from how ``forward``'s own code uses the parameter (ast, no execution):

* ``size``: the whole size argument of ``new_empty/new_zeros/view/reshape/expand/...``,
  or subscripted inside one (``bev_shape[0] * bev_shape[1]``): a tuple of ints;
* ``int``: a ``dim=``/``axis=`` keyword, ``range(n)``, one of several int arguments of a
  size method, ``x.size(d)``, or compared with an int literal;
* ``index``: the index argument of ``index_add_/index_select/gather/scatter...``;
* ``tensor``: saved with ``save_for_backward``, a tensor method called on it, ``.shape``
  read, or indexed/sliced.

Parameters never used in a telling way get no entry (the name heuristics decide).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

#: methods and torch functions whose arguments are sizes (one tuple, or several ints)
SIZE_METHODS = frozenset(
    {"new_empty", "new_zeros", "new_ones", "new_full", "view", "reshape", "expand", "repeat", "zeros", "ones", "empty",
     "randn", "rand", "full", "resize_", "tile", "permute"}
)
#: methods whose index-tensor argument sits at this position (after ``dim``)
INDEX_METHODS = {
    "index_add_": 1, "index_add": 1, "index_copy_": 1, "index_copy": 1, "index_fill_": 1, "index_select": 1,
    "gather": 1, "scatter": 1, "scatter_": 1, "scatter_add": 1, "scatter_add_": 1, "index_put_": 0, "take": 0,
}
INT_KEYWORDS = frozenset({"dim", "axis", "dims", "k", "diagonal", "chunks", "split_size_or_sections"})
#: precedence when one parameter is used in several ways: the most constraining wins
_RANK = {"tensor": 0, "int": 1, "index": 2, "size": 3}


def forward_tree(cls: type) -> ast.FunctionDef | None:
    """The ast of ``cls.forward``; None when its source cannot be read or parsed."""
    try:
        source = textwrap.dedent(inspect.getsource(cls.forward))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    node = tree.body[0] if tree.body else None
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


class _KindReader(ast.NodeVisitor):
    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.kinds: dict[str, str] = {}

    def note(self, node: ast.AST, kind: str) -> None:
        if isinstance(node, ast.Name) and node.id in self.names:
            known = self.kinds.get(node.id)
            if known is None or _RANK[kind] > _RANK[known]:
                self.kinds[node.id] = kind

    def _size_argument(self, node: ast.AST, alone: bool) -> None:
        if isinstance(node, ast.Starred):
            self.note(node.value, "size")
            return
        if alone:
            self.note(node, "size")
        else:
            self.note(node, "int")
        for inner in ast.walk(node):
            if isinstance(inner, ast.Subscript):
                self.note(inner.value, "size")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if isinstance(func, ast.Attribute):
            self.note(func.value, "tensor")  # a method called on it
            if func.attr == "save_for_backward":
                for arg in node.args:
                    self.note(arg, "tensor")
            if func.attr == "size":
                for arg in node.args:
                    self.note(arg, "int")
        if name in SIZE_METHODS:
            sizes = [a for a in node.args if not (name == "new_full" and a is node.args[-1] and len(node.args) > 1)]
            for arg in sizes:
                self._size_argument(arg, alone=len(sizes) == 1)
            for keyword in node.keywords:
                if keyword.arg in ("size", "shape"):
                    self._size_argument(keyword.value, alone=True)
        if name in INDEX_METHODS and len(node.args) > INDEX_METHODS[name]:
            self.note(node.args[INDEX_METHODS[name]], "index")
        if name == "range":
            for arg in node.args:
                self.note(arg, "int")
        for keyword in node.keywords:
            if keyword.arg in INT_KEYWORDS:
                self.note(keyword.value, "int")
            if keyword.arg == "index":
                self.note(keyword.value, "index")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in ("shape", "dtype", "device", "ndim", "T", "mT"):
            self.note(node.value, "tensor")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self.note(node.value, "tensor")  # refined to ``size`` where a size argument holds it
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        if any(isinstance(o, ast.Constant) and type(o.value) is int for o in operands):
            for operand in operands:
                self.note(operand, "int")
        self.generic_visit(node)


def parameter_kinds(cls: type, names: list[str]) -> dict[str, str]:
    """``size``, ``int``, ``index`` or ``tensor`` per parameter of ``forward`` whose use
    tells (names absent from the answer are used in no telling way)."""
    tree = forward_tree(cls)
    if tree is None:
        return {}
    reader = _KindReader(set(names))
    for statement in tree.body:
        reader.visit(statement)
    return reader.kinds


def index_tensor(shape: tuple[int, ...], device: Any) -> Any:
    """A long index vector as long as the first dimension, valid for any dimension of at
    least that size (``index_add_(0, ranks, feats)`` wants ``len(ranks) == feats.size(0)``)."""
    import torch

    length = shape[0] if shape else 1
    return torch.arange(length, device=device).flip(0)


def shape_variants(shape: tuple[int, ...], tensor_names: list[str]) -> list[dict[str, tuple[int, ...]]]:
    """Shapes per tensor parameter for one base shape: all alike first (broadcast partners
    share a shape), then each parameter in turn one dimension short from the front (a
    per-channel weight beside a batch, a state ``c0`` beside a sequence ``x[t]``)."""
    variants = [{name: shape for name in tensor_names}]
    if len(shape) > 1 and len(tensor_names) > 1:
        for name in tensor_names:
            variants.append({other: shape[1:] if other == name else shape for other in tensor_names})
    return variants
