"""Inputs of a changed library function bound from how the project's own code calls it
(issue 17, item 6, class 7).

A changed ``train_step(model, batch)`` in ``pkg/engine.py`` that no script runs gets
synthesized inputs, and a ``batch`` that is a dict of named tensors, a ``config`` or a
``gen`` has no role a name can tell. The project often says what they are: another file
calls the function, and the argument there is built a few lines above the call
(``batch = {"image": torch.randn(8, 3, 32, 32), "label": ...}``), or is the item of a
loop over something built there (``for batch in batches:``).

Found statically (`ast`, no import): the first call of the function in another project
file that imports it (as `found_drivers` finds importers). For a changed method
``Class.method`` the call is ``x.method(...)`` of an instance the caller built before it
in the same scope (``x = Class(...)``, ``x = m.Class(...)``): ``self`` is one more
argument whose recipe is that construction and what it reads (a ``Trainer(config,
model, dataset)`` whose config no name can tell), and the harness calls the side's own
method on it. For each argument whose value
the caller's own scope builds, the *recipe* is the statements that build it: the
assignments before the call that it depends on (the last one of each name), the caller
file's imports and definitions it names, and for a loop variable the first item of the
loop's iterable. An argument built from what the scope does not define (a parameter of
the calling function) has no recipe and is synthesized as before. The recipe is the
project's own code and runs in the same sandbox as the function itself (`binding`).
"""

from __future__ import annotations

import ast
import builtins
import os
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Sequence

from .found_drivers import _exporters, _names, _python_files, _read, _users_in_module

#: statements of a recipe at most (a caller that builds its batch in 200 lines is not
#: a recipe: synthesize)
MAX_RECIPE_STATEMENTS = 40
#: the argument name a method's call site gives its instance under (the caller's
#: ``x`` of ``x = Class(...)``; the recipe is that construction and what it reads)
INSTANCE = "self"


@dataclass(frozen=True)
class CallSite:
    """Where the project calls the changed function and how to rebuild its arguments."""

    #: the calling file relative to the project root, and the call's line
    caller: str
    line: int
    #: parameter name -> the argument's source text at the call
    arguments: dict[str, str] = field(default_factory=dict)
    #: statements (source text, in order) that define what the arguments name
    program: str = ""
    #: parameters without a default that the call gives no recipe for (synthesized)
    synthesized: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return f"{self.caller}:{self.line}"

    def to_json(self) -> dict[str, Any]:
        return {"caller": self.caller, "line": self.line, "arguments": dict(self.arguments), "program": self.program,
                "synthesized": list(self.synthesized)}


def _parameters(tree: ast.Module, name: str, method: str | None = None) -> tuple[list[str], set[str]] | None:
    """The function's parameters in order, and those without a default; for a `method`
    of the class `name`, those after ``self`` (None for a static or class method: no
    instance to build)."""
    body: list[ast.stmt] = tree.body
    if method is not None:
        cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
        if cls is None:
            return None
        body, name = cls.body, method
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            if method is not None and any(isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod") for d in node.decorator_list):
                return None
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            required = {a.arg for a in positional[: len(positional) - len(args.defaults)]}
            required |= {a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None}
            names = [a.arg for a in [*positional, *args.kwonlyargs]]
            if method is not None:
                if not positional:
                    return None
                names = names[1:]
                required.discard(positional[0].arg)
            return names, required
    return None


def _scopes(tree: ast.Module) -> Iterator[tuple[list[ast.stmt], ast.AST]]:
    """Every statement list that is a scope of its own (the module, each function)."""
    yield tree.body, tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.body, node


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _bound_by(statement: ast.stmt) -> set[str]:
    """Names a simple statement binds (assignment targets, imports, definitions)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in statement.names if a.name != "*"}
    targets: list[ast.expr] = []
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        targets = [statement.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


class _Recipe:
    """Collects, for the names an argument reads, the statements of the caller that
    define them, in source order."""

    def __init__(self, module: ast.Module, scope: list[ast.stmt], call_line: int) -> None:
        self.module = module
        self.chosen: dict[int, ast.stmt] = {}  # id -> statement
        self._texts: dict[int, str] = {}
        self.order: dict[int, tuple[int, int]] = {}
        self.ok = True
        # definitions visible at the call: the scope's simple statements before it (the last
        # of each name wins), then the module's (imports, defs, assignments)
        self.local: dict[str, ast.stmt] = {}
        self.loops: dict[str, ast.For] = {}
        self._collect(scope, call_line, self.local, self.loops)
        self.globals: dict[str, ast.stmt] = {}
        if scope is not module.body:
            self._collect(module.body, 1 << 30, self.globals, {})

    @staticmethod
    def _collect(body: list[ast.stmt], before: int, into: dict[str, ast.stmt], loops: dict[str, ast.For]) -> None:
        """Definitions in `body` before line `before`, entering the compound statement
        that holds that line (a loop over batches: its variable is a loop item)."""
        for statement in body:
            if statement.lineno >= before:
                break
            holds_call = before <= (statement.end_lineno or 0)
            if holds_call and isinstance(statement, (ast.For, ast.While, ast.With, ast.If, ast.Try)):
                if isinstance(statement, ast.For) and isinstance(statement.target, ast.Name):
                    loops[statement.target.id] = statement
                _Recipe._collect(statement.body, before, into, loops)
                return
            for name in _bound_by(statement):
                into[name] = statement

    def need(self, names: set[str], depth: int = 0) -> None:
        for name in sorted(names):
            if not self.ok:
                return
            loop = self.loops.get(name)
            statement = self.local.get(name) or self.globals.get(name)
            if loop is not None and (statement is None or statement.lineno < loop.lineno):
                self._take(loop, f"{name} = next(iter({ast.unparse(loop.iter)}))", depth, loop.iter)
            elif statement is not None:
                self._take(statement, None, depth, statement)
            elif not hasattr(builtins, name):
                self.ok = False  # a parameter of the calling function, or unknown

    def _take(self, statement: ast.stmt, text: str | None, depth: int, reads: ast.AST) -> None:
        if id(statement) in self.chosen or not self.ok:
            return
        if depth > MAX_RECIPE_STATEMENTS or len(self.chosen) >= MAX_RECIPE_STATEMENTS:
            self.ok = False
            return
        self.chosen[id(statement)] = statement
        self.order[id(statement)] = (statement.lineno, statement.col_offset)
        self._texts[id(statement)] = text if text is not None else ast.unparse(statement)
        inner = _loads(reads) - _bound_by(statement) if not isinstance(statement, (ast.Import, ast.ImportFrom)) else set()
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            inner = self._free_in_definition(statement)
        self.need(inner, depth + 1)

    @staticmethod
    def _free_in_definition(node: ast.AST) -> set[str]:
        """Names a definition reads that it does not bind itself (roughly: its globals)."""
        stored = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        stored |= {a.arg for n in ast.walk(node) if isinstance(n, ast.arguments)
                   for a in [*n.posonlyargs, *n.args, *n.kwonlyargs, *filter(None, [n.vararg, n.kwarg])]}
        stored |= {n.name for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        return _loads(node) - stored - {"self", "super"}

    def texts(self) -> dict[int, str]:
        return self._texts


def _argument_map(call: ast.Call, parameters: list[str], skip: int = 0) -> dict[str, ast.expr] | None:
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    mapped = dict(zip(parameters[skip:], call.args))
    for keyword in call.keywords:
        if keyword.arg in parameters:
            mapped[keyword.arg] = keyword.value
    return mapped


def _calls(tree: ast.Module, local_names: frozenset[str], modules: frozenset[str], name: str) -> Iterator[ast.Call]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in local_names:
            yield node
        elif isinstance(func, ast.Attribute) and func.attr == name and isinstance(func.value, ast.Name) and func.value.id in modules:
            yield node


def _scope_of(tree: ast.Module, call: ast.Call) -> list[ast.stmt]:
    best = tree.body
    for body, owner in _scopes(tree):
        if owner is tree:
            continue
        if owner.lineno <= call.lineno <= (owner.end_lineno or 0) and (best is tree.body or owner.lineno >= best[0].lineno):
            best = body
    return best


def find_call_site(root: str, path: str, qualname: str) -> CallSite | None:
    """The first call of the changed `qualname` of `path` in another project file under
    `root`, with the recipe of every argument its caller builds; None when no such call
    gives one. A module-level function is found by its name; a method ``Class.method``
    by an instance the caller builds (``trainer = Class(...)``) and a call
    ``trainer.method(...)`` after it in the same scope, whose ``self`` argument is that
    construction (`_method_calls`). A call in the changed file itself is its own
    driver's business (a ``__main__`` block is already run as the script unit)."""
    if not qualname or qualname.count(".") > 1:
        return None
    head, _, method = qualname.partition(".")
    root, changed = os.path.abspath(root), os.path.abspath(path)
    text = _read(changed)
    if text is None or not changed.startswith(root + os.sep):
        return None
    try:
        signature = _parameters(ast.parse(text), head, method or None)
    except (SyntaxError, ValueError):
        return None
    if not signature or not (signature[0] or method):
        return None
    parameters, required = signature
    heads = _users_in_module(changed, {head}) | {head}
    trees: dict[str, ast.Module] = {}
    for file in _python_files(root):
        if file == changed:
            continue
        source = _read(file)
        if source is None or head not in source:  # an exporting `__init__` need not name the method
            continue
        try:
            trees[file] = ast.parse(source, file)
        except (SyntaxError, ValueError):
            continue
    exporters = _exporters(trees, root, changed, heads)
    for file in sorted(trees):
        tree = trees[file]
        names = _names(tree, file, root, changed, {head}, exporters)
        if not names:
            continue
        local = frozenset(n for n in names.members if n == head or n not in heads)
        relative = os.path.relpath(file, root)
        if method:
            for call, instance in _method_calls(tree, local, names.modules, head, method):
                site = _site(tree, call, parameters, relative, instance)
                if site is not None and INSTANCE in site.arguments:
                    return replace(site, synthesized=tuple(p for p in parameters if p in required and p not in site.arguments))
            continue
        for call in _calls(tree, local, names.modules, head):
            site = _site(tree, call, parameters, relative)
            if site is not None:
                return replace(site, synthesized=tuple(p for p in parameters if p in required and p not in site.arguments))
    return None


def _builds(value: ast.expr, local_names: frozenset[str], modules: frozenset[str], name: str) -> bool:
    """Whether `value` is a call of the class `name`: ``Class(...)`` or ``m.Class(...)``."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, ast.Name):
        return func.id in local_names
    return isinstance(func, ast.Attribute) and func.attr == name and isinstance(func.value, ast.Name) and func.value.id in modules


def _method_calls(
    tree: ast.Module, local_names: frozenset[str], modules: frozenset[str], cls: str, method: str
) -> Iterator[tuple[ast.Call, str]]:
    """Calls ``x.method(...)`` of an instance ``x = Class(...)`` built earlier in the same
    scope (a simple name; ``self.x = Class(...)`` is an attribute of another object the
    caller's recipe cannot rebuild alone), with the instance's name. The construction
    must be the name's last assignment before the call, so the recipe's ``x`` is it."""
    for body, owner in _scopes(tree):
        built: dict[str, int] = {}
        for node in _in_order(body):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                name = node.targets[0].id
                if _builds(node.value, local_names, modules, cls):
                    built[name] = node.lineno
                else:
                    built.pop(name, None)
            elif isinstance(node, ast.Call):
                func = node.func
                if (isinstance(func, ast.Attribute) and func.attr == method and isinstance(func.value, ast.Name)
                        and func.value.id in built and built[func.value.id] < node.lineno):
                    yield node, func.value.id


def _in_order(statements: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of `statements` in source order, not entering nested definitions (a
    scope of their own)."""
    nodes: list[ast.AST] = []

    def walk(node: ast.AST) -> None:
        nodes.append(node)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                walk(child)

    for statement in statements:
        if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            walk(statement)
    nodes.sort(key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
    return iter(nodes)


def _site(tree: ast.Module, call: ast.Call, parameters: list[str], relative: str, instance: str | None = None) -> CallSite | None:
    mapped = _argument_map(call, parameters)
    if mapped is None or not (mapped or instance):
        return None
    if instance is not None:
        mapped = {INSTANCE: ast.Name(instance, ast.Load()), **mapped}
    scope = _scope_of(tree, call)
    arguments: dict[str, str] = {}
    statements: dict[int, ast.stmt] = {}
    texts: dict[int, str] = {}
    order: dict[int, tuple[int, int]] = {}
    for parameter, expression in mapped.items():
        recipe = _Recipe(tree, scope, call.lineno)
        recipe.need(_loads(expression))
        if not recipe.ok:
            continue
        arguments[parameter] = ast.unparse(expression)
        statements.update(recipe.chosen)
        texts.update(recipe.texts())
        order.update(recipe.order)
    if not arguments:
        return None
    program = "\n".join(texts[key] for key in sorted(statements, key=lambda key: order[key]))
    return CallSite(relative, call.lineno, arguments, program)


def with_call_sites(units: Sequence[Any], root: str | None, path: str) -> list[Any]:
    """`units` with each changed module-level function or method (also among fallbacks)
    carrying the call site its inputs (and a method's ``self``) are bound from, and
    saying so in its driver label."""
    if not root:
        return list(units)
    found: dict[str, CallSite | None] = {}

    def visit(unit: Any) -> Any:
        fallbacks = tuple(visit(f) for f in unit.fallbacks)
        if unit.kind in ("function", "method") and unit.caller_of is None and unit.qualname:
            if unit.qualname not in found:
                found[unit.qualname] = find_call_site(root, path, unit.qualname)
            site = found[unit.qualname]
            if site is not None:
                what = "self and inputs" if unit.kind == "method" else "inputs"
                label = f"{unit.kind} {unit.qualname} with {what} from its call at {site.where} ({', '.join(site.arguments)})"
                if site.synthesized:
                    label += f", {', '.join(site.synthesized)} synthesized"
                return replace(unit, fallbacks=fallbacks, call_site=site.to_json(), driver=label)
        return replace(unit, fallbacks=fallbacks) if fallbacks != unit.fallbacks else unit

    return [visit(unit) for unit in units]
