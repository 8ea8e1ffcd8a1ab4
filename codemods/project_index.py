"""The project index: what a project's own functions and classes are, across its files.

The per-file semantic model sees one file. A project often wraps torch's grad modes in
its own helpers (`@smart_inference_mode()` of YOLOv5's `utils/torch_utils.py`, built as
`torch.inference_mode()(fn)` behind a decorator factory), subclasses `nn.Module` through
a base class in another file, and builds its models and optimizers in factory functions.
A rule that only knows `torch.*` names then takes a grad-free function for one with grad
on (issue 18, F4). This index answers, by name, for every file of the project:

- which names are grad-disabling decorators or context managers (`DISABLER`), and which
  give one when called (`DISABLER_FACTORY`, like `torch.no_grad` itself);
- which classes are `nn.Module`s (and loss modules), by their bases, followed across files;
- which functions return a model, a loss module or an optimizer.

It is built once per run, before the files are checked, with `ast` (several times
cheaper than libcst, and only statements and a few expressions are read), and travels to
the workers as plain data: per file, the names whose meaning matters. Evaluation follows
imports (absolute, relative, `import *`) the way Python would for a script of the
project (its own folder first, then the project root); a name resolved while it is being
resolved (an import cycle) has no meaning, so cycles end in "unknown", never in a claim.
`torch` is always the installed torch: a project file cannot make `torch.no_grad`, or any
name the file imports from torch, mean something else.
"""

from __future__ import annotations

import ast
import enum
import functools
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from autograd_fix.codemods.torch_api import NO_GRAD_NAMES, SET_GRAD_ENABLED_NAMES

if TYPE_CHECKING:  # the index is built with `ast`: a run answered from the result cache never loads libcst
    import libcst as cst


#: the grad-mode API names a grad-disabling helper is built from (bytes: searched in file contents)
GRAD_MODE_WORDS = (b"no_grad", b"inference_mode", b"set_grad_enabled")
#: a project with more Python files than this is not indexed (the run stays per-file)
MAX_FILES = 20_000
#: files larger than this are not read for the index
MAX_FILE_BYTES = 2_000_000
#: folders never indexed: environments, caches, build output, VCS data
SKIPPED_FOLDERS = frozenset(
    {"site-packages", "node_modules", "__pycache__", "build", "dist", ".git", ".hg", ".tox", ".nox", ".venv", "venv", "env"}
)
#: files that mark a project root, looked for upward from the paths a run is given
ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")

CONTEXTMANAGER_NAMES = frozenset({"contextlib.contextmanager", "contextlib.asynccontextmanager"})
MODULE_BASE_NAMES = frozenset(
    {
        "torch.nn.Module",
        "torch.nn.modules.module.Module",
        "pytorch_lightning.LightningModule",
        "pytorch_lightning.core.LightningModule",
        "lightning.LightningModule",
        "lightning.pytorch.LightningModule",
    }
)
LOSS_BASE_NAMES = frozenset({"torch.nn.modules.loss._Loss", "torch.nn.modules.loss._WeightedLoss"})


class Kind(enum.Enum):
    """What a project name (or the value of an expression) is, as far as grad mode and
    roles go. Anything else is not represented (no claim)."""

    #: a grad-disabling decorator or context manager (`torch.no_grad()`, a decorator
    #: function returning `torch.inference_mode()(fn)`)
    DISABLER = "disabler"
    #: calling it gives a DISABLER (`torch.no_grad`, `smart_inference_mode`, a
    #: `@contextmanager` function yielding under `no_grad`)
    DISABLER_FACTORY = "disabler-factory"
    #: a function that runs with grad off (what a DISABLER returns for a function)
    GRAD_OFF_FUNCTION = "grad-off-function"
    #: an `nn.Module` subclass / a loss-module subclass
    MODULE_CLASS = "module-class"
    LOSS_CLASS = "loss-class"
    #: an optimizer class (`torch.optim.Adam`)
    OPTIMIZER_CLASS = "optimizer-class"
    #: instances
    MODEL = "model"
    LOSS = "loss"
    OPTIMIZER = "optimizer"


#: what calling a value of the key kind gives
_CALL_RESULT = {
    Kind.DISABLER_FACTORY: Kind.DISABLER,
    Kind.DISABLER: Kind.GRAD_OFF_FUNCTION,
    Kind.MODULE_CLASS: Kind.MODEL,
    Kind.LOSS_CLASS: Kind.LOSS,
    Kind.OPTIMIZER_CLASS: Kind.OPTIMIZER,
}


@dataclass(frozen=True)
class Symbol:
    """What one name of a file means: its kind, what calling it gives, or the project
    module (a file's or a package folder's path relative to the root) it is bound to."""

    kind: Kind | None = None
    call: Kind | None = None
    module: str | None = None


def _torch_kind(qualified: str) -> Kind | None:
    """The kind of a torch (or contextlib-free) qualified name, from the vocabulary."""
    if qualified in NO_GRAD_NAMES:
        return Kind.DISABLER_FACTORY
    if qualified in MODULE_BASE_NAMES:
        return Kind.MODULE_CLASS
    if qualified in LOSS_BASE_NAMES:
        return Kind.LOSS_CLASS
    head, _, last = qualified.rpartition(".")
    if head in ("torch.nn", "torch.nn.modules") and last[:1].isupper():
        return Kind.LOSS_CLASS if last.endswith("Loss") else Kind.MODULE_CLASS
    if head == "torch.optim" and last[:1].isupper() and last != "Optimizer":
        return Kind.OPTIMIZER_CLASS
    return None


def _is_false(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


@dataclass
class _Module:
    """One parsed project file: its top-level bindings and imports."""

    path: str  # relative to the root, posix
    tree: ast.Module
    #: top-level name -> defining statement (def, class) or assigned expression
    bindings: dict[str, ast.AST] = field(default_factory=dict)
    #: local name -> (absolute or relative module, imported attribute or None, level)
    imports: dict[str, tuple[str, str | None, int]] = field(default_factory=dict)
    #: `from X import *`: (module, level)
    stars: list[tuple[str, int]] = field(default_factory=list)

    @property
    def folder(self) -> str:
        return os.path.dirname(self.path)

    @property
    def is_package(self) -> bool:
        return os.path.basename(self.path) == "__init__.py"


def _read_module(path: str, tree: ast.Module) -> _Module:
    module = _Module(path, tree)
    pending: list[ast.stmt] = list(tree.body)
    while pending:  # module level, including `if`/`try` blocks (guarded imports)
        statement = pending.pop(0)
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            module.bindings[statement.name] = statement
        elif isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    module.bindings[target.id] = statement.value
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value is not None:
            module.bindings[statement.target.id] = statement.value
        elif isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.asname:
                    module.imports[alias.asname] = (alias.name, None, 0)
                else:
                    top = alias.name.split(".", 1)[0]
                    module.imports[top] = (top, None, 0)
                module.bindings.pop(alias.asname or alias.name.split(".", 1)[0], None)
        elif isinstance(statement, ast.ImportFrom):
            for alias in statement.names:
                if alias.name == "*":
                    module.stars.append((statement.module or "", statement.level))
                else:
                    local = alias.asname or alias.name
                    module.imports[local] = (statement.module or "", alias.name, statement.level)
                    module.bindings.pop(local, None)
        elif isinstance(statement, (ast.If, ast.Try)):
            handlers = [s for handler in getattr(statement, "handlers", []) for s in handler.body]
            pending[0:0] = [*statement.body, *handlers, *statement.orelse, *getattr(statement, "finalbody", [])]
    return module


class _Resolver:
    """Evaluates names and expressions of the project's files, memoised, cycle-safe."""

    def __init__(self, sources: dict[str, bytes], cache: dict[str, ast.Module] | None) -> None:
        #: every project file's bytes; a file is parsed the first time a question reaches it
        self.sources = sources
        self.cache = cache
        #: the files a question may read (None: all); the others mean nothing to it
        self.allowed: set[str] | None = None
        self._parsed: dict[str, _Module | None] = {}
        self.folders = {os.path.dirname(p) for p in sources}
        for path in list(self.folders):
            while path:
                path = os.path.dirname(path)
                self.folders.add(path)
        self._names: dict[tuple[str, str], Symbol | None] = {}
        self._functions: dict[int, Kind | None] = {}
        self._classes: dict[int, Kind | None] = {}
        self._active: set[object] = set()

    def module(self, path: str) -> _Module | None:
        """The parsed file (None: not a project file, not allowed, or it does not parse)."""
        if self.allowed is not None and path not in self.allowed:
            return None
        if path not in self._parsed:
            self._parsed[path] = None
            data = self.sources.get(path)
            if data is not None:
                digest = hashlib.sha1(data).hexdigest()
                tree = self.cache.get(digest) if self.cache is not None else None
                if tree is None:
                    try:
                        tree = ast.parse(data)
                    except (SyntaxError, ValueError, RecursionError, MemoryError):
                        tree = None
                    if tree is not None and self.cache is not None:
                        self.cache[digest] = tree
                if tree is not None:
                    self._parsed[path] = _read_module(path, tree)
        return self._parsed[path]

    def forget(self) -> None:
        """Drop the memoised answers (the allowed files changed); parsed files stay."""
        self._names.clear()
        self._functions.clear()
        self._classes.clear()

    @property
    def parsed(self) -> int:
        return sum(module is not None for module in self._parsed.values())

    # -- modules -------------------------------------------------------------------
    def find_module(self, importer: str, dotted: str, level: int) -> str | None:
        """The project path `dotted` names when imported from `importer` (a file path):
        relative imports from the importer's package; absolute ones from the importer's
        folder (a script's `sys.path[0]`), then from the root."""
        parts = [p for p in dotted.split(".") if p]
        if level:
            base = os.path.dirname(importer)
            for _ in range(level - 1):
                base = os.path.dirname(base)
            return self._locate(base, parts)
        if parts and parts[0] == "torch":
            return None  # torch is the installed torch, never a project file
        for base in dict.fromkeys((os.path.dirname(importer), "")):
            found = self._locate(base, parts)
            if found is not None:
                return found
        return None

    def _locate(self, base: str, parts: list[str]) -> str | None:
        path = "/".join([base] + parts) if base else "/".join(parts)
        if not parts:
            path = base
        if f"{path}.py" in self.sources:
            return f"{path}.py"
        if f"{path}/__init__.py" in self.sources:
            return f"{path}/__init__.py"
        if path in self.folders and path:
            return path  # a namespace package folder
        return None

    def module_attribute(self, module_path: str, name: str) -> Symbol | None:
        """`name` read from a project module (a file, a package, a namespace folder)."""
        if module_path in self.sources:
            found = self.name(module_path, name)
            if found is not None:
                return found
            folder = os.path.dirname(module_path) if os.path.basename(module_path) == "__init__.py" else None
        else:
            folder = module_path
        if folder is not None:
            sub = self._locate(folder, [name])
            if sub is not None:
                return Symbol(module=sub)
        return None

    # -- names -----------------------------------------------------------------------
    def names_bound(self, module_path: str, seen: set[str]) -> set[str]:
        """Every top-level name of a file, star imports followed (cycles stop)."""
        seen.add(module_path)
        module = self.module(module_path)
        if module is None:
            return set()
        names = set(module.bindings) | set(module.imports)
        for source, level in module.stars:
            found = self.find_module(module_path, source, level)
            if found in self.sources and found not in seen:
                names |= self.names_bound(found, seen)
        return names

    def name(self, module_path: str, name: str) -> Symbol | None:
        key = (module_path, name)
        if key in self._names:
            return self._names[key]
        if key in self._active:
            return None  # an import cycle: no claim
        self._active.add(key)
        try:
            module = self.module(module_path)
            result = self._name(module, name) if module is not None else None
        finally:
            self._active.discard(key)
        self._names[key] = result
        return result

    def _name(self, module: _Module, name: str) -> Symbol | None:
        if name in module.bindings:
            return self.node_symbol(module, module.bindings[name])
        if name in module.imports:
            source, attribute, level = module.imports[name]
            if level == 0 and source.split(".", 1)[0] == "torch":
                return self._external(f"{source}.{attribute}" if attribute else source)
            found = self.find_module(module.path, source, level)
            if found is None:
                return self._external(f"{source}.{attribute}" if attribute else source) if level == 0 else None
            if attribute is None:
                return Symbol(module=found)
            return self.module_attribute(found, attribute)
        for source, level in module.stars:
            found = self.find_module(module.path, source, level)
            if found is not None and found in self.sources:
                symbol = self.name(found, name)
                if symbol is not None:
                    return symbol
        return None

    @staticmethod
    def _external(qualified: str) -> Symbol | None:
        kind = _torch_kind(qualified)
        if kind is not None:
            return Symbol(kind=kind, call=_CALL_RESULT.get(kind))
        if qualified in CONTEXTMANAGER_NAMES:
            return _CONTEXTMANAGER
        return _EXTERNAL

    def node_symbol(self, module: _Module, node: ast.AST) -> Symbol | None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return self.function_symbol(module, node)
        if isinstance(node, ast.ClassDef):
            kind = self.class_kind(module, node)
            return Symbol(kind=kind, call=_CALL_RESULT.get(kind)) if kind is not None else None
        if isinstance(node, ast.expr):
            return self.expression(module, node, {})
        return None

    # -- expressions -------------------------------------------------------------------
    def expression(self, module: _Module, node: ast.expr, local: dict[str, Symbol | None]) -> Symbol | None:
        """The meaning of an expression of `module` (`local`: a function's own names)."""
        if isinstance(node, ast.Name):
            if node.id in local:
                return local[node.id]
            return self.name(module.path, node.id)
        if isinstance(node, ast.Attribute):
            base = self.expression(module, node.value, local)
            if base is _EXTERNAL:
                qualified = _dotted_head_target(module, _dotted(node), local)
                return self._external(qualified) if qualified is not None else None
            if base is not None and base.module is not None and base is not _CONTEXTMANAGER:
                return self.module_attribute(base.module, node.attr)
            return None
        if isinstance(node, ast.Call):
            func = self.expression(module, node.func, local)
            if func is None:
                return None
            if func.kind is Kind.DISABLER_FACTORY and _torch_call_keeps_grad(module, node, local):
                return None
            if func.call is not None:
                return Symbol(kind=func.call, call=_CALL_RESULT.get(func.call))
            return None
        if isinstance(node, ast.IfExp):
            body = self.expression(module, node.body, local)
            orelse = self.expression(module, node.orelse, local)
            return body if body == orelse else None
        return None

    # -- functions and classes ---------------------------------------------------------
    def function_symbol(self, module: _Module, node: ast.FunctionDef | ast.AsyncFunctionDef) -> Symbol | None:
        """A function is a DISABLER (a decorator: calling it with a function gives a
        grad-off function), a factory of one, or of a model/loss/optimizer."""
        key = id(node)
        if key in self._functions:
            result = self._functions[key]
        elif key in self._active:
            return None
        else:
            self._active.add(key)
            try:
                result = self._function_result(module, node)
            finally:
                self._active.discard(key)
            self._functions[key] = result
        decorated = self._decorated_kind(module, node)
        if decorated is not None:
            return Symbol(kind=decorated)
        if result is None:
            return None
        if result is Kind.GRAD_OFF_FUNCTION:
            return Symbol(kind=Kind.DISABLER, call=result)
        return Symbol(call=result)

    def _decorated_kind(self, module: _Module, node: ast.FunctionDef | ast.AsyncFunctionDef) -> Kind | None:
        for decorator in node.decorator_list:
            symbol = self.expression(module, decorator, {})
            if symbol is not None and symbol.kind is Kind.DISABLER:
                return Kind.GRAD_OFF_FUNCTION
        return None

    def _function_result(self, module: _Module, node: ast.FunctionDef | ast.AsyncFunctionDef) -> Kind | None:
        """What calling the function gives, when every `return` agrees."""
        for decorator in node.decorator_list:
            if self.expression(module, decorator, {}) is _CONTEXTMANAGER:
                return Kind.DISABLER if _yields_under_disabler(self, module, node) else None
        local: dict[str, Symbol | None] = {}
        for argument in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
            local[argument.arg] = None
        returns: list[ast.expr | None] = []
        for statement in _own_statements(node):
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = self.function_symbol(module, statement)
                if inner is None and _runs_under_disabler(self, module, statement, local):
                    inner = Symbol(kind=Kind.GRAD_OFF_FUNCTION)  # a wrapper calling under `with no_grad()`
                local[statement.name] = inner
            elif isinstance(statement, ast.Assign):
                value = self.expression(module, statement.value, local)
                for target in statement.targets:
                    if isinstance(target, ast.Name):
                        local[target.id] = value if target.id not in local or local[target.id] == value else None
            elif isinstance(statement, ast.Return):
                returns.append(statement.value)
        if not returns:
            return None
        kinds = set()
        for value in returns:
            symbol = self.expression(module, value, local) if value is not None else None
            kinds.add(symbol.kind if symbol is not None else None)
        return kinds.pop() if len(kinds) == 1 else None

    def class_kind(self, module: _Module, node: ast.ClassDef) -> Kind | None:
        key = id(node)
        if key in self._classes:
            return self._classes[key]
        if key in self._active:
            return None
        self._active.add(key)
        try:
            result = self._class_kind(module, node)
        finally:
            self._active.discard(key)
        self._classes[key] = result
        return result

    def _class_kind(self, module: _Module, node: ast.ClassDef) -> Kind | None:
        kinds = set()
        for base in node.bases:
            symbol = self.expression(module, base, {})
            kinds.add(symbol.kind if symbol is not None else None)
        for kind in (Kind.LOSS_CLASS, Kind.MODULE_CLASS, Kind.OPTIMIZER_CLASS, Kind.DISABLER_FACTORY):
            if kind in kinds:
                return kind
        for statement in node.body:
            if isinstance(statement, ast.FunctionDef) and statement.name == "__enter__":
                if any(_disables_call(self, module, call, {}) for call in _calls(statement)):
                    return Kind.DISABLER_FACTORY
        return None


#: a name of an installed (non-project) module: its attributes resolve by qualified name
_EXTERNAL = Symbol(module="<external>")
_CONTEXTMANAGER = Symbol(module="<contextmanager>")


def _dotted_head_target(module: _Module, qualified: str | None, local: dict[str, Symbol | None]) -> str | None:
    """`T.no_grad` under `import torch as T` -> `torch.no_grad` (through the file's imports)."""
    if qualified is None:
        return None
    head, _, rest = qualified.partition(".")
    if head in local or head not in module.imports:
        return None
    source, attribute, level = module.imports[head]
    if level:
        return None
    target = f"{source}.{attribute}" if attribute else source
    return f"{target}.{rest}" if rest else target


def _torch_call_keeps_grad(module: _Module, call: ast.Call, local: dict[str, Symbol | None]) -> bool:
    """`inference_mode(False)`: a factory call that does not disable grad."""
    qualified = _dotted_head_target(module, _dotted(call.func), local) or ""
    if qualified.endswith("inference_mode"):
        return bool(call.args) and _is_false(call.args[0])
    return False


def _own_statements(node: ast.AST) -> Iterable[ast.stmt]:
    """Statements of a function body, nested blocks included, nested defs as one
    statement (their bodies are not the function's)."""
    pending: list[ast.stmt] = list(getattr(node, "body", []))
    while pending:
        statement = pending.pop(0)
        yield statement
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        for name in ("body", "orelse", "finalbody"):
            pending.extend(getattr(statement, name, []) or [])
        for handler in getattr(statement, "handlers", []) or []:
            pending.extend(handler.body)


def _calls(node: ast.AST) -> Iterable[ast.Call]:
    return (child for child in ast.walk(node) if isinstance(child, ast.Call))


def _disables_call(resolver: _Resolver, module: _Module, call: ast.Call, local: dict[str, Symbol | None]) -> bool:
    """`torch.set_grad_enabled(False)` or a call giving a DISABLER, as a statement."""
    qualified = _dotted_head_target(module, _dotted(call.func), local) or ""
    if qualified in SET_GRAD_ENABLED_NAMES:
        return bool(call.args) and _is_false(call.args[0])
    symbol = resolver.expression(module, call, local)
    return symbol is not None and symbol.kind is Kind.DISABLER


def _with_disables(resolver: _Resolver, module: _Module, node: ast.With | ast.AsyncWith, local: dict[str, Symbol | None]) -> bool:
    for item in node.items:
        symbol = resolver.expression(module, item.context_expr, local)
        if symbol is not None and symbol.kind is Kind.DISABLER:
            return True
    return False


def _yields_under_disabler(resolver: _Resolver, module: _Module, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A `@contextmanager` generator whose `yield` runs under a grad-disabling `with`,
    or after `set_grad_enabled(False)`."""
    for statement in _own_statements(node):
        if isinstance(statement, (ast.With, ast.AsyncWith)) and _with_disables(resolver, module, statement, {}):
            if any(isinstance(child, (ast.Yield, ast.YieldFrom)) for child in ast.walk(statement)):
                return True
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            if _dotted_head_target(module, _dotted(statement.value.func), {}) in SET_GRAD_ENABLED_NAMES:
                if _disables_call(resolver, module, statement.value, {}):
                    return True
    return False


def _runs_under_disabler(
    resolver: _Resolver, module: _Module, node: ast.FunctionDef | ast.AsyncFunctionDef, outer: dict[str, Symbol | None]
) -> bool:
    """A wrapper whose body calls the wrapped function inside a grad-disabling `with`."""
    return any(
        isinstance(statement, (ast.With, ast.AsyncWith)) and _with_disables(resolver, module, statement, outer)
        for statement in _own_statements(node)
    )


@dataclass(frozen=True)
class ProjectIndex:
    """The project's names that mean something, per file (paths relative to `root`).

    Plain data (picklable): what workers receive. `tables[path][name]` is the Symbol of a
    name bound at the top level of that file (defined, assigned or imported)."""

    root: str
    tables: dict[str, dict[str, Symbol]]
    #: the tabled files, the folders above them and those folders' `__init__.py` (what an
    #: attribute chain `utils.torch_utils.x` walks through); kept small, since this
    #: travels to the workers with every chunk of jobs
    files: frozenset[str] = frozenset()
    #: how many files the build parsed (the others were never reached by a question)
    parsed: int = 0

    @functools.cached_property
    def fingerprint(self) -> str:
        """A digest of what the index knows: a file's findings depend on it (a decorator
        in another file that turns grad off), so the result cache keys on it too."""
        facts = sorted((path, sorted((name, repr(symbol)) for name, symbol in table.items())) for path, table in self.tables.items())
        return hashlib.sha256(repr((self.root, facts)).encode()).hexdigest()

    @classmethod
    def build(cls, root: str | Path, cache: dict[str, ast.Module] | None = None, *, everything: bool = False) -> "ProjectIndex":
        """Index the Python files under `root` (skipping environments and build output).

        What a run asks (grad mode) is answered for every file at the cost of parsing
        few: the files that mention a grad-mode API (`no_grad`, `inference_mode`,
        `set_grad_enabled`), then, round by round, the files that mention a name found to
        disable grad (an import of it, an alias, a re-export), and whatever their imports
        reach. `everything` tables every file (module classes and factories everywhere).
        `cache` maps a file's content digest to its parsed tree: a caller that rebuilds
        (a language server) passes the same dict and reparses only changed files."""
        root_path = Path(root).resolve()
        sources: dict[str, bytes] = {}
        for path in python_files(root_path):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if len(data) <= MAX_FILE_BYTES:
                sources[path.relative_to(root_path).as_posix()] = data
        resolver = _Resolver(sources, cache)
        tables: dict[str, dict[str, Symbol]] = {}
        if everything:
            pending = list(sources)
        else:
            pending = [p for p, data in sources.items() if _may_define_grad_mode(data)]
            resolver.allowed = set(pending)
        names: set[bytes] = set()
        while pending:
            for relative in pending:
                tables.pop(relative, None)
                table = _table(resolver, relative)
                if table:
                    tables[relative] = table
            found = {name.encode() for table in tables.values() for name, symbol in table.items() if _disables(symbol)}
            new, names = found - names, names | found
            pending = [p for p, data in sources.items() if any(w in data for w in new)] if new and not everything else []
            if pending and resolver.allowed is not None:
                resolver.allowed.update(pending)
                resolver.forget()  # an answer given before may change now that more files are read
        return cls(str(root_path), tables, _reachable_paths(tables, sources), resolver.parsed)

    def view(self, path: str) -> "ProjectView | None":
        """The index as seen from one file of the project; None for a file outside it."""
        try:
            relative = Path(path).resolve().relative_to(self.root).as_posix()
        except (ValueError, OSError):
            return None
        if relative not in self.tables:
            return None  # none of its names means anything to the index
        return ProjectView(self, relative)

    def lookup(self, path: str, dotted: str) -> Symbol | None:
        """The meaning of `a.b.c` in file `path`: `a` from its table, then attributes of
        project modules (a name the module binds, else a submodule of a package)."""
        head, *rest = dotted.split(".")
        symbol = self.tables.get(path, {}).get(head)
        for part in rest:
            if symbol is None or symbol.module is None:
                return None
            module = symbol.module
            symbol = self.tables.get(module, {}).get(part)
            if symbol is None and not (module.endswith(".py") and not module.endswith("/__init__.py") and module != "__init__.py"):
                symbol = self._submodule(os.path.dirname(module) if module.endswith(".py") else module, part)
        return symbol

    def _submodule(self, folder: str, part: str) -> Symbol | None:
        candidate = f"{folder}/{part}" if folder else part
        for path in (f"{candidate}.py", f"{candidate}/__init__.py", candidate):
            if path in self.files:
                return Symbol(module=path)
        return None


@dataclass(frozen=True)
class ProjectView:
    """One file's window on the project index: what its names mean (`ImportIndex.project`)."""

    index: ProjectIndex
    path: str

    def symbol(self, node: cst.BaseExpression) -> Symbol | None:
        # imported here: the index itself is built with `ast` and must not load libcst (a
        # run answered from the result cache builds it and checks no file)
        from autograd_fix.codemods.imports import dotted_name

        name = dotted_name(node)
        return self.index.lookup(self.path, name) if name is not None else None

    def disables_grad(self, expression: cst.BaseExpression) -> bool:
        """`@smart_inference_mode()`, `with eval_context():`, `@no_grad_decorator`: a
        project decorator or context manager that turns grad off."""
        import libcst as cst

        if type(expression) is cst.Call:
            symbol = self.symbol(expression.func)
            return symbol is not None and symbol.call is Kind.DISABLER
        symbol = self.symbol(expression)
        return symbol is not None and symbol.kind is Kind.DISABLER

    def kind_of_call(self, func: cst.BaseExpression) -> Kind | None:
        """What calling a project name gives (a model, a loss, an optimizer, a disabler)."""
        symbol = self.symbol(func)
        return symbol.call if symbol is not None else None

    def is_module_class(self, node: cst.BaseExpression) -> bool:
        symbol = self.symbol(node)
        return symbol is not None and symbol.kind in (Kind.MODULE_CLASS, Kind.LOSS_CLASS)


def _reachable_paths(tables: dict[str, dict[str, Symbol]], sources: dict[str, bytes]) -> frozenset[str]:
    """The paths a lookup may walk through: tabled files, their folders, the folders'
    `__init__.py` (module symbols only ever name files or folders above a tabled file,
    or files whose names mean nothing, where a lookup ends in no claim anyway)."""
    found: set[str] = set(tables)
    for path in tables:
        folder = os.path.dirname(path)
        while folder:
            found.add(folder)
            if f"{folder}/__init__.py" in sources:
                found.add(f"{folder}/__init__.py")
            folder = os.path.dirname(folder)
    return frozenset(found)


def _table(resolver: _Resolver, relative: str) -> dict[str, Symbol]:
    """The names of one file that mean something (star imports followed)."""
    table: dict[str, Symbol] = {}
    for name in resolver.names_bound(relative, set()):
        try:
            symbol = resolver.name(relative, name)
        except RecursionError:
            symbol = None
        if symbol is not None and symbol not in (_EXTERNAL, _CONTEXTMANAGER):
            if symbol.kind is not None or symbol.call is not None or symbol.module is not None:
                table[name] = symbol
    return table


def _may_define_grad_mode(data: bytes) -> bool:
    """Can this file define a grad-disabling helper? It names a grad-mode API somewhere
    other than a `with` line or a decorator (those only use one), or it writes context
    managers or wrappers (`contextmanager`, `__enter__`, `functools.wraps`), where a
    `with torch.no_grad():` line is what the helper does."""
    if not any(word in data for word in GRAD_MODE_WORDS):
        return False
    if any(word in data for word in (b"contextmanager", b"__enter__", b"wraps(")):
        return True
    # only the lines that hold a word are looked at (found with `bytes.find`, in C): a
    # split of every file into lines cost more than the rest of the index on timm
    for word in GRAD_MODE_WORDS:
        at = data.find(word)
        while at >= 0:
            start = max(data.rfind(b"\n", 0, at), data.rfind(b"\r", 0, at)) + 1  # `splitlines`' line ends
            if not data[start : at + len(word)].lstrip().startswith((b"with ", b"@", b"#")):
                return True
            at = data.find(word, at + 1)
    return False


def _disables(symbol: Symbol) -> bool:
    return Kind.DISABLER in (symbol.kind, symbol.call) or symbol.kind is Kind.DISABLER_FACTORY


def python_files(root: Path) -> list[Path]:
    """The project's `.py` files that are regular files (a FIFO named `pipe.py` would
    block the read), environments and build output left out; [] past `MAX_FILES`."""
    found: list[Path] = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(s for s in subfolders if s not in SKIPPED_FOLDERS and not s.startswith("."))
        found.extend(Path(folder, f) for f in sorted(files) if f.endswith(".py") and os.path.isfile(os.path.join(folder, f)))
        if len(found) > MAX_FILES:
            return []
    return found


def project_root(paths: Iterable[str | Path]) -> Path | None:
    """The root of the project the paths belong to: the nearest folder above the first
    path holding a project marker (`pyproject.toml`, `setup.py`, `.git`), else that
    path's own folder. None when no path exists."""
    for raw in paths:
        try:
            path = Path(raw).resolve()
            if not path.exists():
                continue
        except (OSError, RuntimeError):  # a symlink loop: that path says nothing
            continue
        start = path if path.is_dir() else path.parent
        for folder in (start, *start.parents):
            if any((folder / marker).exists() for marker in ROOT_MARKERS):
                return folder
        return start
    return None
