"""The read-only traversal every analysis uses: order, pruning and libcst's visitor protocol."""

from __future__ import annotations

import dataclasses

import libcst as cst

from autograd_fix.codemods.walk import SyntaxIndex, children_of, find_all, iter_descendants, walk

SOURCE = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, hidden: int = 8) -> None:
        super().__init__()
        self.fc = nn.Linear(4, hidden)

    @torch.no_grad()
    def predict(self, x, *, scale=1.0):
        return self.fc(x)[0, ::2] * scale if x.ndim else None


def train(model, loader, optimizer):
    losses = {"total": []}
    for step, (inputs, target) in enumerate(loader):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs), target)
        loss.backward()
        optimizer.step()
        losses["total"] += [loss.item()]
    return [value for value in losses["total"] if value > 0], lambda: {k: v for k, v in losses.items()}
'''


def reference_descendants(node: cst.CSTNode) -> list[cst.CSTNode]:
    """What the traversal means, written the slow, obvious way: every CSTNode reachable
    through a dataclass field that is not formatting, in field order, pre-order."""
    formatting = {
        "lpar", "rpar", "lbracket", "rbracket", "lbrace", "rbrace", "comma", "semicolon", "colon",
        "leading_lines", "lines_after_decorators", "header", "footer", "trailing_whitespace",
        "equal", "star", "dot", "operator", "whitespace_after_at", "newline", "first_line",
        "empty_lines", "asynchronous", "whitespace_before_colon",
    }
    result = [node]
    for field in dataclasses.fields(node):
        if field.name in formatting or field.name.startswith("whitespace"):
            continue
        value = getattr(node, field.name)
        values = value if isinstance(value, (list, tuple)) else [value]
        for item in values:
            if isinstance(item, cst.CSTNode):
                result.extend(reference_descendants(item))
    return result


def test_descendants_follow_field_order_and_skip_formatting() -> None:
    module = cst.parse_module(SOURCE)
    got = list(iter_descendants(module))
    assert [id(n) for n in got] == [id(n) for n in reference_descendants(module)]
    assert not any(isinstance(n, (cst.Comma, cst.LeftParen, cst.SimpleWhitespace, cst.Newline)) for n in got)
    # a tuple target, a slice, a star-only parameter list and a lambda body are all reached
    kinds = {type(n) for n in got}
    assert {cst.Tuple, cst.Slice, cst.ParamStar, cst.Lambda, cst.DictComp}.issubset(kinds)


def test_children_of_is_a_fresh_list_each_call() -> None:
    call = cst.parse_expression("f(a, b=c)")
    first = children_of(call)
    first.reverse()
    assert [type(n) for n in children_of(call)] == [cst.Name, cst.Arg, cst.Arg]


def test_prune_skips_a_subtree_but_yields_its_root() -> None:
    module = cst.parse_module(SOURCE)
    names = [n.value for n in iter_descendants(module, prune=lambda n: isinstance(n, cst.ClassDef)) if isinstance(n, cst.Name)]
    assert "Net" not in names and "fc" not in names  # the class's own name is below it too
    assert "loader" in names


class CallsOutsideFunctions(cst.CSTVisitor):
    """A `visit_*` returning False skips the children; None visits them."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.left: list[str] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node.name.value != "train"

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(cst.Module([]).code_for_node(node.func))

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.left.append(node.name.value)


def test_visit_false_skips_children_and_leave_runs_for_visited_nodes() -> None:
    visitor = CallsOutsideFunctions()
    walk(cst.parse_module(SOURCE), visitor)
    assert "optimizer.zero_grad" not in visitor.calls
    assert "nn.Linear" in visitor.calls and "torch.no_grad" in visitor.calls
    # unlike libcst, a node whose visit said False is not left either: analyses pair
    # their visit/leave bookkeeping (scope stacks) on that
    assert visitor.left == ["__init__", "predict"]


class GenericCounter(cst.CSTVisitor):
    """libcst's generic protocol: a falsy `on_visit` (None included) skips children."""

    def __init__(self) -> None:
        self.seen: list[type] = []
        self.left = 0

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.seen.append(type(node))
        return not isinstance(node, cst.ClassDef)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.left += 1


def test_generic_on_visit_skips_on_any_falsy_result() -> None:
    visitor = GenericCounter()
    walk(cst.parse_module(SOURCE), visitor)
    assert visitor.seen.count(cst.ClassDef) == 1
    assert cst.Param in visitor.seen  # train's parameters
    assert visitor.seen.count(cst.Param) == 3  # but not those of the skipped class's methods
    assert visitor.left == len(visitor.seen) - 1  # every visited node but the skipped class is left

    class SaysNone(cst.CSTVisitor):
        def __init__(self) -> None:
            self.count = 0

        def on_visit(self, node: cst.CSTNode) -> None:  # type: ignore[override]
            self.count += 1

    says_none = SaysNone()
    walk(cst.parse_module(SOURCE), says_none)
    assert says_none.count == 1  # None is falsy: only the module itself


def test_batched_walk_sees_every_node() -> None:
    module = cst.parse_module(SOURCE)

    class AllCalls(cst.BatchableCSTVisitor):
        def __init__(self) -> None:
            self.calls = 0

        def visit_Call(self, node: cst.Call) -> None:
            self.calls += 1

    counter = AllCalls()
    SyntaxIndex(module).walk_batched([counter])
    assert counter.calls == sum(isinstance(n, cst.Call) for n in iter_descendants(module)) == 13


class Recorder(cst.CSTVisitor):
    """Every visit and leave, in order, skipping the bodies of functions named `train`."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.events.append(("visit", id(node)))
        return not (isinstance(node, cst.FunctionDef) and node.name.value == "train")

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.events.append(("leave", id(original_node)))


def test_index_walk_makes_the_same_calls_in_the_same_order() -> None:
    module = cst.parse_module(SOURCE)
    index = SyntaxIndex(module)
    for root in (module, module.body[2], module.body[3]):
        for make in (Recorder, CallsOutsideFunctions):
            plain, indexed = make(), make()
            walk(root, plain)
            index.walk(root, indexed)
            assert vars(plain) == vars(indexed)


def test_index_batched_walk_matches_a_plain_walk() -> None:
    module = cst.parse_module(SOURCE)

    class Events(cst.CSTVisitor):
        def __init__(self) -> None:
            self.events: list[tuple[str, str]] = []

        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            self.events.append(("in", node.name.value))

        def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
            self.events.append(("out", original_node.name.value))

        def visit_Call(self, node: cst.Call) -> None:
            self.events.append(("call", cst.Module([]).code_for_node(node.func)))

    # a batched walk is a plain walk per visitor (these visitors never prune)
    plain, indexed = Events(), Events()
    walk(module, plain)
    SyntaxIndex(module).walk_batched([indexed])
    assert plain.events == indexed.events
    assert ("out", "predict") in indexed.events


def test_index_find_and_contains_agree_with_the_plain_search() -> None:
    module = cst.parse_module(SOURCE)
    index = SyntaxIndex(module)
    train = module.body[3]
    for root in (module, train, module.body[2]):
        for types, skip in ((cst.Call, ()), ((cst.Name, cst.Attribute), cst.Lambda), (cst.Call, (cst.FunctionDef, cst.Lambda))):
            assert index.find(root, types, skip=skip) == find_all(root, types, skip=skip)
    call = find_all(train, cst.Call)[0]
    assert index.contains(train, call) and not index.contains(module.body[2], call)
    # a node built by a rule is not in the tree: the plain search answers
    stranger = cst.parse_expression("f(g(x))")
    assert index.find(stranger, cst.Call) == find_all(stranger, cst.Call)
    assert index.contains(stranger, stranger.args[0].value) and not index.contains(train, stranger)


def test_index_descendants_agree_with_the_plain_traversal() -> None:
    module = cst.parse_module(SOURCE)
    index = SyntaxIndex(module)
    nested = lambda node: isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda))  # noqa: E731
    for root in (module, module.body[2], module.body[3], find_all(module, cst.Lambda)[0]):
        for prune in (None, nested, lambda node: isinstance(node, cst.Call)):
            assert list(index.descendants(root, prune)) == list(iter_descendants(root, prune))
    # the root is never pruned, whatever the test says of it
    train = module.body[3]
    assert list(index.descendants(train, nested)) == list(iter_descendants(train, nested))
    assert len(list(index.descendants(train, nested))) > 10
    stranger = cst.parse_expression("f(lambda: g(x))")
    assert list(index.descendants(stranger, nested)) == list(iter_descendants(stranger, nested))


def test_parent_map_names_each_node_s_parent() -> None:
    from autograd_fix.codemods.semantic.loops import ancestors, parent_map

    module = cst.parse_module(SOURCE)
    parents = parent_map(module)
    nodes = list(iter_descendants(module))
    assert len(parents) == len(nodes) - 1 and id(module) not in parents
    for node in nodes[1:]:
        assert any(child is node for child in children_of(parents[id(node)]))
    backward = next(n for n in nodes if isinstance(n, cst.Attribute) and n.attr.value == "backward")
    assert [type(a).__name__ for a in ancestors(backward, parents)][:3] == ["Call", "Expr", "SimpleStatementLine"]


def test_index_parents_agree_with_the_plain_parent_map() -> None:
    from autograd_fix.codemods.semantic.loops import parent_map

    module = cst.parse_module(SOURCE)
    index = SyntaxIndex(module)
    for root in (module, module.body[2], module.body[3], *find_all(module, (cst.For, cst.Call, cst.Lambda))):
        plain, indexed = parent_map(root), parent_map(root, index)
        assert plain.keys() == indexed.keys() and all(plain[key] is indexed[key] for key in plain)
        assert id(root) not in indexed  # the subtree's root has no parent in its own map
    assert len(parent_map(module, index)) == len(reference_descendants(module)) - 1
    stranger = cst.parse_expression("f(g(x))")  # not in the tree: the plain walk answers
    assert index.parents(stranger) is None
    assert parent_map(stranger, index)[id(stranger.args[0].value)] is stranger.args[0]


def test_node_types_of_is_issubclass_over_every_node_class() -> None:
    from autograd_fix.codemods.walk import _NODE_TYPES, node_types_of

    for bases in (cst.BaseExpression, (cst.BaseSuite, cst.If), cst.BaseCompoundStatement, cst.Name):
        wanted = bases if isinstance(bases, tuple) else (bases,)
        assert node_types_of(bases) == frozenset(cls for cls in _NODE_TYPES if issubclass(cls, wanted))


def test_handlers_are_the_visitor_class_s_methods_and_no_code_sets_one_on_an_instance() -> None:
    """Walks resolve `visit_*` / `leave_*` once per visitor class: a handler assigned to an
    instance would be silently ignored, so the code base must not do that."""
    import ast
    from pathlib import Path

    class Names(cst.CSTVisitor):
        def __init__(self) -> None:
            self.seen: list[str] = []

        def visit_Name(self, node: cst.Name) -> None:
            self.seen.append(node.value)

    module = cst.parse_module("a = b(c)\n")
    for run in (walk, SyntaxIndex(module).walk):
        finder = Names()
        run(module, finder)
        assert finder.seen == ["a", "b", "c"]
    handlers = ("visit_", "leave_", "on_visit", "on_leave")
    root = Path(__file__).resolve().parent.parent
    assigned = [
        f"{path.relative_to(root)}:{node.lineno}"
        for folder in ("codemods", "verification", "cli")
        for path in (root / folder).rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Attribute) and target.attr.startswith(handlers)
    ]
    assert not assigned, assigned
