"""Training-loop facts shared by rules: scopes, parents, backward calls, bindings, statement order.

AGF002 (missing zero_grad), AGF006 (history accumulated across iterations) and AGF011
(unneeded `retain_graph=True`) all reason about "a loop that runs backward": which calls
backpropagate and through which tensor, which names a loop body binds and where, which
statements run unconditionally in each iteration, and whether a value is broken off the
graph (`.item()`, `.detach()`). Everything here is syntactic and conservative: rules use it
to rule rewrites *out*; a question it cannot answer gets the answer that keeps code as is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY, Role
from autograd_fix.codemods.walk import SyntaxIndex, children_of, find_all, walk

#: methods that backpropagate (`loss.backward()`, Lightning's `self.manual_backward(loss)`)
BACKWARD_METHODS = frozenset({"backward", "manual_backward"})
#: receivers whose `.backward(loss)` takes the loss as argument (Accelerate, Fabric, DeepSpeed)
#: calls that read or build gradients without going through `.backward()`
_AUTOGRAD_PREFIXES = ("torch.autograd.", "torch.func.", "functorch")
#: attributes / calls that return a value cut off the autograd graph
BREAKING_METHODS = frozenset({"detach", "item", "tolist", "numpy", "data", "detach_"})
BREAKING_FUNCTIONS = frozenset({"float", "int", "bool", "str", "len"})
#: receivers of `.step()` that are optimizers (by the name the code gives them)
_NESTED_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def parent_map(root: cst.CSTNode, syntax: SyntaxIndex | None = None) -> dict[int, cst.CSTNode]:
    """`id(child) -> parent` for every node under `root` (cheaper than libcst metadata;
    read off the file's index when given)."""
    indexed = syntax.parents(root) if syntax is not None else None
    if indexed is not None:
        return indexed
    parents: dict[int, cst.CSTNode] = {}
    stack = [root]
    pop, extend = stack.pop, stack.extend
    while stack:
        node = pop()
        children = children_of(node)
        for child in children:
            parents[id(child)] = node
        extend(children)
    return parents


def ancestors(node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> Iterator[cst.CSTNode]:
    """Parents of `node`, nearest first, up to the module."""
    current = parents.get(id(node))
    while current is not None:
        yield current
        current = parents.get(id(current))


def enclosing_scope(node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> cst.CSTNode:
    """The innermost function around `node`, or the module (a script)."""
    last = node
    for parent in ancestors(node, parents):
        if type(parent) in (cst.FunctionDef, cst.Lambda):
            return parent
        last = parent
    return last


def innermost_loop(node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> cst.For | cst.While | None:
    """The nearest loop whose body holds `node`, not looking past a function boundary."""
    child = node
    for parent in ancestors(node, parents):
        if isinstance(parent, _NESTED_SCOPES):
            return None
        if type(parent) in (cst.For, cst.While) and child is parent.body:
            return parent
        child = parent
    return None


def local_nodes(
    root: cst.CSTNode, types: type | tuple[type, ...], syntax: SyntaxIndex | None = None
) -> list[cst.CSTNode]:
    """Nodes of `types` under `root` in source order, not inside nested defs, classes or
    lambdas (read off the file's index when given)."""
    return (syntax.find if syntax is not None else find_all)(root, types, skip=_NESTED_SCOPES)


def all_nodes(
    root: cst.CSTNode, types: type | tuple[type, ...], syntax: SyntaxIndex | None = None
) -> list[cst.CSTNode]:
    """Nodes of `types` anywhere under `root`, nested defs included (for fail-closed checks)."""
    return (syntax.find if syntax is not None else find_all)(root, types)


def has_keyword(call: cst.Call, keyword: str) -> cst.Arg | None:
    for argument in call.args:
        if argument.keyword is not None and argument.keyword.value == keyword:
            return argument
    return None


def is_backward_call(call: cst.Call, imports: ImportIndex) -> bool:
    """`x.backward(...)`, `self.manual_backward(x)`, `accelerator.backward(x)`, `torch.autograd.backward(x)`."""
    if imports.qualified_name(call.func) in {"torch.autograd.backward"}:
        return True
    return type(call.func) is cst.Attribute and call.func.attr.value in BACKWARD_METHODS


def is_gradient_call(call: cst.Call, imports: ImportIndex) -> bool:
    """Any call that backpropagates or computes gradients (backward, autograd.grad, torch.func)."""
    if is_backward_call(call, imports):
        return True
    qualified = imports.qualified_name(call.func)
    return qualified is not None and qualified.startswith(_AUTOGRAD_PREFIXES) and qualified not in {
        "torch.autograd.Function",
        "torch.autograd.Variable",
    } and not qualified.startswith(("torch.autograd.grad_mode", "torch.autograd.no_grad", "torch.autograd.set_grad"))


def backward_root(call: cst.Call, imports: ImportIndex) -> cst.BaseExpression | None:
    """The tensor a backward call backpropagates from, or None when unclear.

    `loss.backward()` -> `loss`; `scaler.scale(loss).backward()` -> `loss`;
    `accelerator.backward(loss)` / `self.manual_backward(loss)` /
    `torch.autograd.backward(loss)` -> `loss`.
    """
    if imports.qualified_name(call.func) == "torch.autograd.backward":
        return _first_positional(call)
    if type(call.func) is not cst.Attribute:
        return None
    receiver = call.func.value
    if call.func.attr.value == "manual_backward":
        return _first_positional(call)
    receiver_name = dotted_name(receiver)
    if receiver_name is not None and (
        receiver_name == "self" or DEFAULT_VOCABULARY.has(receiver_name, Role.BACKWARD_RUNNER)
    ):
        return _first_positional(call)
    if (
        type(receiver) is cst.Call
        and type(receiver.func) is cst.Attribute
        and receiver.func.attr.value == "scale"
        and len(receiver.args) == 1
        and receiver.args[0].keyword is None
    ):
        return receiver.args[0].value  # GradScaler: scaler.scale(loss).backward()
    return receiver


def backward_has_gradient_argument(call: cst.Call, imports: ImportIndex) -> bool:
    """Does the call pass an explicit `gradient` (so the root may be non-scalar)?"""
    if has_keyword(call, "gradient") or has_keyword(call, "grad_tensors") or any(a.star for a in call.args):
        return True
    positional = [a for a in call.args if a.keyword is None]
    root = backward_root(call, imports)
    root_is_argument = bool(positional) and root is positional[0].value
    return len(positional) > (1 if root_is_argument else 0)


def _first_positional(call: cst.Call) -> cst.BaseExpression | None:
    for argument in call.args:
        if argument.keyword is None and argument.star == "":
            return argument.value
    return None


def breaks_graph(node: cst.CSTNode) -> bool:
    """Does the expression contain `.detach()`, `.item()`, `.data`, `float(...)` & co. anywhere?

    Used to rule out "this value carries a graph": any cut anywhere means we do not know.
    """
    for attribute in all_nodes(node, cst.Attribute):
        assert type(attribute) is cst.Attribute
        if attribute.attr.value in BREAKING_METHODS:
            return True
    for call in all_nodes(node, cst.Call):
        assert type(call) is cst.Call
        if type(call.func) is cst.Name and call.func.value in BREAKING_FUNCTIONS:
            return True
    return False


def read_name_nodes(node: cst.CSTNode) -> list[cst.Name]:
    """Every `Name` read in an expression (attribute names and keywords excluded)."""
    collector = _ReadNames()
    walk(node, collector)
    return collector.names


class _ReadNames(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: list[cst.Name] = []

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        walk(node.value, self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        walk(node.value, self)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append(node)

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


@dataclass
class Binding:
    """One place a name is (re)bound: the statement, its kind and the assigned value."""

    name: str
    kind: str  # "assign", "augassign", "annassign", "for", "with", "walrus", "del", "import", "def"
    statement: cst.CSTNode
    value: cst.BaseExpression | None = None


#: the nodes that bind names (searched for by type, not visited one by one)
_BINDING_NODES = (
    cst.FunctionDef, cst.ClassDef, cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.WithItem,
    cst.NamedExpr, cst.Del, cst.ExceptHandler, cst.Import, cst.ImportFrom,
)


def bindings(root: cst.CSTNode, syntax: SyntaxIndex | None = None) -> list[Binding]:
    """Where names are bound under `root` (local only: nested defs bind their own names;
    read off the file's index when given)."""
    collector = _BindingCollector(root)
    for node in (syntax.find if syntax is not None else find_all)(root, _BINDING_NODES, skip=_NESTED_SCOPES):
        collector.on_visit(node)
    return collector.found


class _BindingCollector(cst.CSTVisitor):
    def __init__(self, root: cst.CSTNode) -> None:
        super().__init__()
        self.root = root
        self.found: list[Binding] = []

    def _targets(self, target: cst.BaseExpression, kind: str, statement: cst.CSTNode, value) -> None:
        if type(target) is cst.Name:
            self.found.append(Binding(target.value, kind, statement, value))
        elif type(target) in (cst.Tuple, cst.List):
            for element in target.elements:
                self._targets(element.value, kind, statement, value)
        elif type(target) is cst.StarredElement:
            self._targets(target.value, kind, statement, value)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node is not self.root and type(node) in (cst.FunctionDef, cst.ClassDef):
            self.found.append(Binding(node.name.value, "def", node))
            return False
        if node is not self.root and type(node) is cst.Lambda:
            return False
        if type(node) is cst.Assign:
            for target in node.targets:
                self._targets(target.target, "assign", node, node.value)
        elif type(node) is cst.AugAssign:
            self._targets(node.target, "augassign", node, node.value)
        elif type(node) is cst.AnnAssign and node.value is not None:
            self._targets(node.target, "annassign", node, node.value)
        elif type(node) is cst.For:
            self._targets(node.target, "for", node, node.iter)
        elif type(node) is cst.WithItem and node.asname is not None:
            self._targets(node.asname.name, "with", node, node.item)
        elif type(node) is cst.NamedExpr:
            self._targets(node.target, "walrus", node, node.value)
        elif type(node) is cst.Del:
            self._targets(node.target, "del", node, None)
        elif type(node) is cst.ExceptHandler and node.name is not None:
            self._targets(node.name.name, "with", node, None)
        elif type(node) in (cst.Import, cst.ImportFrom) and type(node.names) is not cst.ImportStar:
            for alias in node.names:
                local = alias.asname.name if alias.asname is not None else alias.name
                if type(local) is cst.Name:
                    self.found.append(Binding(local.value, "import", node))
                elif type(local) is cst.Attribute:
                    head = dotted_name(local)
                    if head:
                        self.found.append(Binding(head.split(".")[0], "import", node))
        return True


def declared_global(scope: cst.CSTNode, syntax: SyntaxIndex | None = None) -> set[str]:
    """Names a scope declares `global` or `nonlocal` (their bindings escape the scope)."""
    names: set[str] = set()
    for node in local_nodes(scope, (cst.Global, cst.Nonlocal), syntax):
        assert type(node) in (cst.Global, cst.Nonlocal)
        names.update(item.name.value for item in node.names)
    return names


def runs_every_iteration(node: cst.CSTNode, loop: cst.For | cst.While, parents: dict[int, cst.CSTNode]) -> bool:
    """Is `node` reached on every iteration of `loop` (only `with` blocks between them)?"""
    child = node
    for parent in ancestors(node, parents):
        if parent is loop:
            return child is loop.body
        if type(parent) in (cst.If, cst.Try, cst.TryStar, cst.For, cst.While, cst.Match, cst.ExceptHandler,
                               cst.Else, cst.Finally, cst.FunctionDef, cst.Lambda, cst.ClassDef):
            return False
        if type(parent) in (cst.BooleanOperation, cst.IfExp, cst.CompFor):
            return False
        child = parent
    return False


def statement_line(node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> cst.SimpleStatementLine | None:
    """The `SimpleStatementLine` holding `node` when that line sits in an indented block or the module."""
    for parent in ancestors(node, parents):
        if type(parent) is cst.SimpleStatementLine:
            holder = parents.get(id(parent))
            return parent if type(holder) in (cst.IndentedBlock, cst.Module) else None
        if isinstance(parent, (cst.BaseCompoundStatement, cst.SimpleStatementSuite)):
            return None
    return None


def expression_statement_call(line: cst.SimpleStatementLine) -> cst.Call | None:
    """The call of a line that is exactly one call statement (`opt.step()`), else None."""
    if len(line.body) == 1 and type(line.body[0]) is cst.Expr and type(line.body[0].value) is cst.Call:
        return line.body[0].value
    return None


def block_statements(line: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> list[cst.CSTNode]:
    """The statements of the block (indented block or module) that holds `line`."""
    holder = parents.get(id(line))
    if type(holder) in (cst.IndentedBlock, cst.Module):
        return list(holder.body)
    return []


@dataclass
class StatementOrder:
    """Source-order index of every node under a root (pre-order), for before/after questions."""

    index: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, root: cst.CSTNode) -> "StatementOrder":
        order = cls()
        counter = _Counter(order.index)
        walk(root, counter)
        return order

    def position(self, node: cst.CSTNode) -> int:
        return self.index.get(id(node), -1)


class _Counter(cst.CSTVisitor):
    def __init__(self, index: dict[int, int]) -> None:
        super().__init__()
        self.index = index

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.index[id(node)] = len(self.index)
        return True


class RootTracker:
    """Mixin for rules that analyse only where it matters, riding the engine's one traversal.

    Full-module traversals cost about half a second each on a large file (libcst visits
    are slow), so the rules here never walk the whole module themselves: during the
    engine's batched traversal they note the outermost function around each call of
    interest (`interesting(root)`), and in `leave_Module` analyse only those roots (the
    module itself only for code at the top level, i.e. scripts).
    """

    def _init_tracker(self) -> None:
        self._def_stack: list[cst.FunctionDef] = []
        self._roots: dict[int, cst.CSTNode] = {}
        self._module: cst.Module | None = None

    def visit_Module(self, node: cst.Module) -> None:
        self._module = node

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._def_stack.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._def_stack.pop()

    @property
    def enclosing_functions(self) -> list[cst.FunctionDef]:
        """The functions around the node being visited, outermost first."""
        return self._def_stack

    def note_interesting(self) -> None:
        """Remember the root (outermost function, or the module) around the current node."""
        root: cst.CSTNode | None = self._def_stack[0] if self._def_stack else self._module
        if root is not None:
            self._roots.setdefault(id(root), root)

    def interesting_roots(self) -> list[cst.CSTNode]:
        """Roots to analyse; the module (if noted) swallows every function root."""
        if self._module is not None and id(self._module) in self._roots:
            return [self._module]
        return list(self._roots.values())
