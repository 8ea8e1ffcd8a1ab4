"""What a unit's body says about its parameters, read from the syntax tree.

Why: a name is weak evidence of a role (``w`` may be a weight matrix or a width, ``k`` a
key tensor or a count), while the body is strong evidence: ``k.transpose(-2, -1)``,
``x @ w``, ``torch.softmax(q, -1)`` or ``discriminator(real)`` can only mean tensors. The
binder decides from this first and lets names break ties.

Pure ast: no user code runs here.
"""

from __future__ import annotations

import ast
import io
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

_OTHER_TYPES = (int, float, complex, str, bytes, list, tuple, dict, set, nn.Module, torch.device, torch.dtype)
#: attributes only a tensor has (not a number, container, string, module, device)
TENSOR_ATTRIBUTES = frozenset(
    name
    for name in dir(torch.Tensor)
    if not name.startswith("_") and not any(hasattr(kind, name) for kind in _OTHER_TYPES)
)
#: attributes only a module has (``optimizer.zero_grad`` is shared, so not here)
MODULE_ATTRIBUTES = frozenset(
    {"parameters", "named_parameters", "modules", "named_modules", "children", "named_children", "state_dict",
     "load_state_dict", "buffers", "named_buffers", "train", "eval", "apply", "register_forward_hook",
     "register_forward_pre_hook", "register_buffer", "register_parameter"}
)
#: torch functions whose first argument is not a tensor to synthesize
_NOT_TENSOR_FIRST = frozenset(
    {
        "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "arange",
        "linspace", "logspace", "eye", "manual_seed", "seed", "device", "save", "load", "no_grad", "enable_grad",
        "set_grad_enabled", "inference_mode", "compile", "jit", "set_num_threads", "get_default_dtype",
        "set_default_dtype", "is_tensor", "numel", "Size", "Generator", "autocast", "einsum",
    }
)
#: functions whose second positional argument is a tensor as well (the matrix ones marked)
_SECOND_TENSOR = frozenset(
    {
        "add", "sub", "mul", "div", "maximum", "minimum", "dot", "cross", "dist", "cosine_similarity",
        "pairwise_distance", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss",
        "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "cdist", "allclose", "equal",
        "conv1d", "conv2d", "conv3d", "embedding",
    }
)
_MATRIX_SECOND = frozenset({"matmul", "mm", "bmm", "linear", "mv", "addmm", "baddbmm"})
_TORCH_ROOTS = frozenset({"torch", "F", "functional", "nn"})
#: torch namespaces whose functions take devices, parameters, seeds or files, not inputs
_NOT_TENSOR_NAMESPACES = frozenset(
    {"cuda", "backends", "distributed", "utils", "optim", "jit", "onnx", "hub", "multiprocessing", "random", "mps",
     "amp", "profiler", "testing", "compiler", "init"}
)


@dataclass
class Use:
    """One parameter's evidence; `tensor` says why it reads as a tensor (None: no sign)."""

    tensor: str | None = None
    matrix: bool = False
    #: the first module callee it is passed to (``self.encoder``, ``model.decoder``)
    callee: ast.expr | None = None
    called: bool = False
    iterated: bool = False
    #: ``relu.parameters()``, ``net.eval()``: only a module has these
    module: bool = False
    #: ``inputs, labels = batch``: one batch of a loader
    unpacked: bool = False
    #: the fewest dimensions the body needs: ``x.size(2)`` or ``x.shape[2]`` need 3,
    #: ``torch.bmm(x, ...)`` needs 3 (0: no sign)
    min_rank: int = 0
    #: axes (after the batch axis) the body indexes with a computed position, such as
    #: ``y[:, t : t + 1]`` in a loop over time steps: they need more than one entry
    stepped_axes: set[int] = field(default_factory=set)

    @property
    def reads_as_tensor(self) -> bool:
        return self.tensor is not None and not self.called and not self.iterated and not self.module and not self.unpacked


@dataclass
class UnitText:
    """The unit function's own source and the names it reads; empty when not found."""

    text: str = ""
    names: set[str] = field(default_factory=set)
    uses: dict[str, Use] = field(default_factory=dict)


def _find_function(tree: ast.Module, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    scope: list[ast.stmt] = tree.body
    found: ast.AST | None = None
    for part in qualname.split("."):
        found = next(
            (
                node
                for node in scope
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == part
            ),
            None,
        )
        if found is None:
            return None
        scope = found.body  # type: ignore[attr-defined]
    return found if isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _torch_function(func: ast.expr) -> str | None:
    """``torch.nn.functional.relu`` or ``F.relu`` -> "relu"; None for anything that is
    not a torch function taking input tensors (``torch.cuda.synchronize``, ``nn.Linear``)."""
    if not isinstance(func, ast.Attribute):
        return None
    leaf = func.attr
    middle: list[str] = []
    node: ast.expr = func.value
    while isinstance(node, ast.Attribute):
        middle.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in _TORCH_ROOTS:
        return None
    if leaf in _NOT_TENSOR_FIRST or leaf[:1].isupper() or _NOT_TENSOR_NAMESPACES.intersection(middle):
        return None
    return leaf


#: products over a batch of matrices: both operands have exactly three dimensions
_BATCHED_MATRIX = frozenset({"bmm", "baddbmm"})


def _rank_for_index(node: ast.expr) -> int:
    """Dimensions that indexing dimension `node` needs (``2`` -> 3, ``-3`` -> 3; 0: unknown)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value + 1 if node.value >= 0 else -node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        value = node.operand.value
        return value if isinstance(value, int) and not isinstance(value, bool) else 0
    return 0


def _computed_position(part: ast.expr) -> bool:
    """An index or slice bound that is computed (``t``, ``t + 1``), not a literal or ``:``."""
    if isinstance(part, ast.Slice):
        return any(bound is not None and _computed_position(bound) for bound in (part.lower, part.upper))
    return not isinstance(part, (ast.Constant, ast.UnaryOp, ast.Starred))


def _names_in(node: ast.expr) -> list[str]:
    """The names an argument is or holds (``x``, ``[x, y]``, ``(x, y)``)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [elt.id for elt in node.elts if isinstance(elt, ast.Name)]
    if isinstance(node, (ast.Starred, ast.Subscript)):
        return _names_in(node.value)  # ``*xs``, ``y[:, t]``: the name holds tensors too
    return []


class _Collector(ast.NodeVisitor):
    def __init__(self, params: set[str], is_module: Callable[[ast.expr], bool]) -> None:
        self.params = params
        self.is_module = is_module
        self.uses: dict[str, Use] = {name: Use() for name in params}
        self.names: set[str] = set()
        #: calls of a parameter (``relu(x)``): a module call once ``relu.parameters()`` is seen
        self.param_calls: list[ast.Call] = []
        #: calls of plain names with a parameter among the arguments (maybe the file's helpers)
        self.helper_calls: list[ast.Call] = []

    def _mark(self, name: str, why: str, matrix: bool = False, callee: ast.expr | None = None) -> None:
        use = self.uses.get(name)
        if use is None:
            return
        if use.tensor is None:
            use.tensor = why
        use.matrix = use.matrix or matrix
        if use.callee is None:
            use.callee = callee

    def visit_Name(self, node: ast.Name) -> None:
        self.names.add(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and node.attr in TENSOR_ATTRIBUTES:
            self._mark(node.value.id, f"its body uses {node.value.id}.{node.attr}")
        if isinstance(node.value, ast.Name) and node.attr in MODULE_ATTRIBUTES and node.value.id in self.uses:
            self.uses[node.value.id].module = True
        self.generic_visit(node)

    def _needs_rank(self, name: str, rank: int) -> None:
        use = self.uses.get(name)
        if use is not None and rank > use.min_rank:
            use.min_rank = rank

    def visit_Subscript(self, node: ast.Subscript) -> None:
        value = node.value
        if isinstance(value, ast.Attribute) and value.attr == "shape" and isinstance(value.value, ast.Name):
            rank = _rank_for_index(node.slice)
            if rank:
                self._needs_rank(value.value.id, rank)
        if isinstance(value, ast.Name) and value.id in self.uses:
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            for axis, part in enumerate(parts):
                if axis and _computed_position(part):
                    self.uses[value.id].stepped_axes.add(axis)
                    self._needs_rank(value.id, axis + 1)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if isinstance(node.value, ast.Name) and node.value.id in self.uses:
            if any(isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) >= 2 for target in node.targets):
                self.uses[node.value.id].unpacked = True
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            # a right operand is a weight matrix only beside a plain input (``x @ w``);
            # after a computed left side (``attn @ v``) its shape is the left's business
            right_is_matrix = isinstance(node.left, ast.Name)
            for side, matrix in ((node.left, False), (node.right, right_is_matrix)):
                if isinstance(side, ast.Name):
                    self._mark(side.id, "its body multiplies it with @", matrix=matrix)
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        if isinstance(node.iter, ast.Name) and node.iter.id in self.uses:
            self.uses[node.iter.id].iterated = True
        self.generic_visit(node)

    def visit_comprehension(self, node: ast.comprehension) -> None:
        if isinstance(node.iter, ast.Name) and node.iter.id in self.uses:
            self.uses[node.iter.id].iterated = True
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in self.uses:
            self.uses[func.id].called = True
            self.param_calls.append(node)
        elif isinstance(func, ast.Name) and any(isinstance(a, ast.Name) and a.id in self.uses for a in node.args):
            self.helper_calls.append(node)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.attr == "size" and node.args:
            rank = _rank_for_index(node.args[0])
            if rank:
                self._needs_rank(func.value.id, rank)
        if isinstance(func, ast.Attribute) and func.attr in _BATCHED_MATRIX:
            operands = node.args[:2] if _torch_function(func) is not None else [func.value, *node.args[:1]]
            for operand in operands:
                if isinstance(operand, ast.Name):
                    self._needs_rank(operand.id, 3)
        leaf = _torch_function(func)
        if leaf is not None:
            self._torch_call(leaf, node)
        elif isinstance(func, ast.Attribute) and func.attr in ("mm", "matmul", "bmm", "mv") and node.args:
            for name in _names_in(node.args[0]):
                self._mark(name, f"its body passes it to .{func.attr}()", matrix=True)
        elif self.is_module(func):
            callee = ast.unparse(func)
            for arg in node.args:
                for name in _names_in(arg):
                    self._mark(name, f"its body passes it to {callee}(...)", callee=func)
        self.generic_visit(node)

    def finish(self) -> None:
        """Arguments of a parameter the body also uses as a module are tensors."""
        for call in self.param_calls:
            func = call.func
            if isinstance(func, ast.Name) and self.uses[func.id].module and not self.is_module(func):
                for arg in call.args:
                    for name in _names_in(arg):
                        self._mark(name, f"its body passes it to {func.id}(...)", callee=func)

    def _torch_call(self, leaf: str, node: ast.Call) -> None:
        for position, arg in enumerate(node.args[:2]):
            if position == 1 and leaf not in _SECOND_TENSOR and leaf not in _MATRIX_SECOND and leaf not in ("cat", "stack"):
                break
            for name in _names_in(arg):
                self._mark(name, f"its body passes it to {leaf}()", matrix=position == 1 and leaf in _MATRIX_SECOND)


def read_unit(
    source: str, qualname: str | None, is_module: Callable[[ast.expr], bool], tree: ast.Module | None = None
) -> UnitText:
    """The unit's text, the names it reads, and each parameter's evidence; `is_module`
    says whether a callee (``self.encoder``, ``discriminator``) is a module, so that
    its positional arguments are tensors. A parameter passed on to another function of
    the file takes that function's evidence for it (one call deep). `tree`: `source`
    already parsed (a binder parses it once for all its questions)."""
    if not qualname:
        return UnitText()
    if tree is None:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            return UnitText()
    function = _find_function(tree, qualname)
    if function is None:
        return UnitText()
    collector = _collect(function, is_module)
    _inherit_from_helpers(tree, collector, is_module)
    return UnitText(text=_segment(source, function), names=collector.names, uses=collector.uses)


def _segment(source: str, node: ast.stmt) -> str:
    """`node`'s source text, as ``ast.get_source_segment`` gives it, without that
    function's pure-Python split of the whole file (a cost per run that grew with it)."""
    if node.end_lineno is None or node.end_col_offset is None:
        return ""
    # lines as the tokenizer counts them (\n, \r\n, \r; not form feeds or U+2028)
    lines = io.StringIO(source, newline="").readlines()[node.lineno - 1 : node.end_lineno]
    if not lines:
        return ""
    if len(lines) == 1:
        return lines[0].encode()[node.col_offset : node.end_col_offset].decode(errors="replace")
    first = lines[0].encode()[node.col_offset :].decode(errors="replace")
    last = lines[-1].encode()[: node.end_col_offset].decode(errors="replace")
    return first + "".join(lines[1:-1]) + last


def _positional_params(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    return [a.arg for a in function.args.posonlyargs + function.args.args]


def _collect(
    function: ast.FunctionDef | ast.AsyncFunctionDef, is_module: Callable[[ast.expr], bool], modules: frozenset[str] = frozenset()
) -> _Collector:
    """Evidence for `function`'s parameters; `modules` are known to be modules (the
    caller's evidence), so calls of them take tensors."""
    arguments = function.args
    params = {a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs}
    collector = _Collector(params, is_module)
    for name in modules & params:
        collector.uses[name].module = True
    for statement in function.body:
        collector.visit(statement)
    collector.finish()
    for arg in arguments.posonlyargs + arguments.args + arguments.kwonlyargs:
        annotation = ast.unparse(arg.annotation) if arg.annotation is not None else ""
        if annotation.split(".")[-1] == "Tensor":
            collector._mark(arg.arg, f"annotated {annotation}")
    return collector


def _inherit_from_helpers(tree: ast.Module, collector: _Collector, is_module: Callable[[ast.expr], bool]) -> None:
    """``loss_fn(relu, x_samples)`` where the file's ``loss_fn`` calls ``relu(x_samples)``:
    the helper's evidence about its parameters is evidence about the arguments."""
    helpers = {
        node.name: node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    for call in collector.helper_calls:
        helper = helpers.get(call.func.id) if isinstance(call.func, ast.Name) else None
        if helper is None:
            continue
        pairs = list(zip(call.args, _positional_params(helper)))
        modules = frozenset(
            param for arg, param in pairs if isinstance(arg, ast.Name) and arg.id in collector.uses and collector.uses[arg.id].module
        )
        theirs = _collect(helper, is_module, modules).uses
        for arg, param in pairs:
            ours = collector.uses.get(arg.id) if isinstance(arg, ast.Name) else None
            use = theirs.get(param)
            if ours is None or use is None:
                continue
            if use.reads_as_tensor:
                collector._mark(arg.id, f"{helper.name}() uses it as a tensor ({use.tensor})", matrix=use.matrix)
            ours.module = ours.module or use.module
            ours.called = ours.called or use.called
