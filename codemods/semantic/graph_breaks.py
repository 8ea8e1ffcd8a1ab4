"""Where a loss's gradient path is cut: re-wraps, history-cutting links, backward sinks.

`torch.tensor(loss.item(), requires_grad=True)`, `Variable(loss.data, requires_grad=True)`
and `loss.detach().requires_grad_()` make fresh leaves; `.item()`, `.data`, `.detach()`,
`.numpy()` and copy constructors cut history; `loss.backward()`,
`scaler.scale(loss).backward()`, `manual_backward(loss)` and a `training_step`'s return
are where a value is backpropagated. Syntactic facts of one expression or statement,
shared by rules that reason about broken gradient flow.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from autograd_fix.codemods.expressions import is_true, method_chain
from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.names import name_tokens
from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY, Role
from autograd_fix.codemods.walk import walk

VARIABLE_NAMES = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
#: torch calls that copy a value into a new tensor with no history
COPY_CALLS = frozenset({"torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor", "torch.FloatTensor"})
#: tensor methods/attributes that cut the history (their result has no grad_fn)
BREAKING_LINKS = frozenset({"item", "data", "detach", "numpy", "tolist"})
#: links that only copy or move (no extra break, but a fix must drop them too)
COPY_LINKS = frozenset({"clone", "cpu", "cuda", "to", "float", "double", "contiguous"})
#: receivers of `.backward(loss)` that run the backward of their argument


@dataclass(frozen=True)
class Rewrap:
    #: the tensor whose value was re-wrapped (None: not a single tensor, e.g. a sum)
    tensor: cst.BaseExpression | None
    #: breaking/copying links between the tensor and the re-wrap, in order
    links: tuple[str, ...]
    #: a dtype conversion or a device move is part of the re-wrap
    converts: bool


def parse_rewrap(call: cst.Call, imports: ImportIndex) -> Rewrap | None:
    """`torch.tensor(x.item(), requires_grad=True)`, `Variable(x.data, requires_grad=True)`,
    `x.detach().requires_grad_()`: the re-wrapped tensor and how it was cut."""
    qualified = imports.qualified_name(call.func)
    if qualified in {"torch.tensor"} | VARIABLE_NAMES:
        if not _keyword_true(call, "requires_grad") or not call.args or call.args[0].keyword is not None:
            return None
        if any(a.keyword is None for a in call.args[1:]) or any(a.star for a in call.args):
            return None
        converts = any(a.keyword is not None and a.keyword.value == "dtype" for a in call.args)
        if qualified in VARIABLE_NAMES and any(
            a.keyword is not None and a.keyword.value not in {"requires_grad"} for a in call.args
        ):
            converts = True
        return _unwrap(call.args[0].value, imports, converts, wrapped_in_copy=True)
    if type(call.func) is cst.Attribute and call.func.attr.value == "requires_grad_":
        if call.args and not (len(call.args) == 1 and is_true(call.args[0].value)):
            return None
        receiver = call.func.value
        rewrap = _unwrap(receiver, imports, False, wrapped_in_copy=False)
        if rewrap is None or not (set(rewrap.links) & {"detach", "data", "item", "numpy", "tolist"} or rewrap.converts):
            return None
        return rewrap
    return None


def sequence_rewrap(call: cst.Call, imports: ImportIndex) -> list[cst.BaseExpression] | None:
    """`torch.tensor([a, b], requires_grad=True)` / `torch.tensor([f(x) for x in xs], ...)`:
    the element expressions (one for a comprehension) copied into a fresh leaf."""
    if imports.qualified_name(call.func) != "torch.tensor" or not _keyword_true(call, "requires_grad"):
        return None
    if not call.args or call.args[0].keyword is not None or any(a.star for a in call.args):
        return None
    data = call.args[0].value
    if type(data) is cst.ListComp:
        return [data.elt]
    if type(data) in (cst.List, cst.Tuple) and data.elements:
        if any(type(e) is cst.StarredElement for e in data.elements):
            return None
        return [e.value for e in data.elements]
    return None


def _unwrap(node: cst.BaseExpression, imports: ImportIndex, converts: bool, wrapped_in_copy: bool) -> Rewrap | None:
    """Strip breaking and copying links (and copy calls) off `node` down to the tensor."""
    links: list[str] = []
    current = node
    while True:
        if type(current) is cst.Call and imports.qualified_name(current.func) in COPY_CALLS:
            if not current.args or current.args[0].keyword is not None:
                return None
            converts = True
            current = current.args[0].value
            continue
        if type(current) is cst.Call and type(current.func) is cst.Attribute and not current.args:
            name = current.func.attr.value
            if name in BREAKING_LINKS or name in COPY_LINKS:
                links.append(name)
                current = current.func.value
                continue
        if type(current) is cst.Call and type(current.func) is cst.Attribute and current.func.attr.value == "to":
            links.append("to")
            current = current.func.value
            continue
        if type(current) is cst.Attribute and current.attr.value == "data":
            links.append("data")
            current = current.value
            continue
        break
    links.reverse()
    if not links and not wrapped_in_copy:
        return None
    if _is_expression_of_items(current):
        return Rewrap(None, tuple(links), converts)
    if any(link in {"cpu", "cuda", "to", "float", "double", "numpy", "tolist"} for link in links):
        converts = True
    return Rewrap(current, tuple(links), converts)


def numpy_roots(node: cst.BaseExpression) -> list[tuple[cst.BaseExpression, list[tuple[str, cst.Call | None]]]]:
    """Every `x.<...>.numpy()` in `node`: its root `x` and the links up to `.numpy()`."""
    finder = CallFinder()
    walk(node, finder)
    roots = []
    for call in finder.calls:
        if type(call.func) is cst.Attribute and call.func.attr.value == "numpy" and not call.args:
            roots.append(method_chain(call))
    return roots


def _is_expression_of_items(node: cst.BaseExpression) -> bool:
    """`l1.item() + 0.1 * l2.item()`: not one tensor."""
    return type(node) in (cst.BinaryOperation, cst.UnaryOperation, cst.List, cst.Tuple)


# --- sinks -----------------------------------------------------------------------------


def statement_sink(small: cst.BaseSmallStatement, imports: ImportIndex, training_step: bool) -> cst.BaseExpression | None:
    """The expression a statement backpropagates (`loss` in `loss.backward()`), if any."""
    if type(small) is cst.Expr:
        return sink_of_expression(small.value, imports)
    if type(small) is cst.Return and training_step and small.value is not None:
        value = small.value
        if type(value) is cst.Dict:
            for element in value.elements:
                if type(element) is cst.DictElement and type(element.key) is cst.SimpleString:
                    if element.key.evaluated_value == "loss":
                        return element.value
            return None
        return value
    return None


def sink_of_expression(node: cst.BaseExpression, imports: ImportIndex) -> cst.BaseExpression | None:
    if type(node) is not cst.Call:
        return None
    qualified = imports.qualified_name(node.func)
    if qualified in {"torch.autograd.backward", "torch.autograd.grad"} and node.args:
        return node.args[0].value
    if type(node.func) is not cst.Attribute:
        return None
    method = node.func.attr.value
    if method == "manual_backward" and node.args:
        return node.args[0].value
    if method != "backward":
        return None
    receiver = node.func.value
    receiver_name = dotted_name(receiver) or ""
    if node.args and DEFAULT_VOCABULARY.has_any(name_tokens(receiver_name.replace(".", "_")), Role.BACKWARD_RUNNER):
        return node.args[0].value
    # `scaler.scale(loss).backward()`
    if type(receiver) is cst.Call and type(receiver.func) is cst.Attribute and receiver.func.attr.value == "scale":
        if len(receiver.args) == 1:
            return receiver.args[0].value
    return receiver


def _keyword_true(call: cst.Call, name: str) -> bool:
    return any(a.keyword is not None and a.keyword.value == name and is_true(a.value) for a in call.args)


def has_break(node: cst.CSTNode | None, imports: ImportIndex) -> bool:
    """Does `node` contain a history-cutting op (`.item()`, `.detach()`, `.data`, numpy, copies)?"""
    if node is None:
        return True
    finder = _BreakFinder(imports)
    walk(node, finder)
    return finder.found


class _BreakFinder(cst.CSTVisitor):
    def __init__(self, imports: ImportIndex) -> None:
        super().__init__()
        self.imports = imports
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.imports.qualified_name(node.func)
        if qualified in COPY_CALLS or qualified in VARIABLE_NAMES:
            self.found = True
        if type(node.func) is cst.Attribute and node.func.attr.value in BREAKING_LINKS | {"requires_grad_"}:
            self.found = True

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "data":
            self.found = True


class CallFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[cst.Call] = []

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)
