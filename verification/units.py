"""Split a patch into runnable units: what changed, and the best driver that runs it.

Pure `ast` work, no torch, so the cli can plan verification before the worker is warm.

The preferred driver is the file's own: a *script* unit runs the whole file as
``__main__`` (a ``__main__`` block or top-level code). Without one, a user-named driver
(``driver = ...`` in ``[tool.autograd-fix.verify]``) runs the project with the changed
file in place. Each driver unit lists the changed functions it must reach (`targets`)
and, as `fallbacks`, the *function* units that run them alone with bound inputs; the
worker falls back when the driver never calls them or fails for a reason that has
nothing to do with the change. A function unit imports the real module (every
statement, under a non-``__main__`` name), so line numbers are the file's own.
"""

from __future__ import annotations

import ast
import symtable
from dataclasses import dataclass, field, replace

from autograd_fix.codemods.semantic.answer import Answer
from autograd_fix.codemods.semantic.module_bases import base_answer, class_answer
from autograd_fix.codemods.torch_api import MODULE_ONLY_METHODS

from .drivers import Command, function_label, script_label
from .source_memo import SourceMemo, global_reads

MAIN_KEY = "__main__"
SCRIPT_ENTRIES = {"__main__", "script", "<script>", "<module>"}


@dataclass(frozen=True)
class Unit:
    """One runnable unit in both versions.

    `kind` is ``script``, ``function``, ``method`` or ``autograd_function``; `mode` is
    what the user sees (``script`` or ``function``). `original`/`rewritten` hold the
    source each side executes. `free_names` are globals the unit reads that the reduced
    module does not define: they are bound like parameters.
    """

    name: str
    kind: str
    original: str
    rewritten: str
    qualname: str | None = None
    free_names: tuple[str, ...] = ()
    problem: str | None = None  # set when the unit cannot run at all (reason)
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: how the verdict names what ran: "script driver (__main__)", "driver `...`", ...
    driver: str = ""
    #: a user-named driver (kind ``driver``): `drivers.Command`, laid out by the api
    command: Command | None = None
    #: qualnames of changed code a driver must reach, else its `fallbacks` run instead
    targets: tuple[str, ...] = ()
    fallbacks: tuple["Unit", ...] = ()
    #: the script part itself changed: the driver's run is needed even if no target ran
    script_changed: bool = False
    #: line ranges of the original's top-level code outside ``__main__`` blocks: importing
    #: the file runs it, so a function fallback cannot get past a failure there
    import_lines: tuple[tuple[int, int], ...] = ()
    #: set on a *caller* unit: the changed function (qualname) this same-file caller
    #: calls. A caller only looks for what the change breaks further up (the rewritten
    #: raising where the original ran clean); it is never evidence that the fix is right
    caller_of: str | None = None
    #: on an ``autograd_function`` unit: apply() argument positions this file's own code
    #: fills with a value that can carry a graph, each with where (see `graph_inputs`)
    graph_inputs: tuple[tuple[int, str], ...] = ()
    #: on a function unit: the project's own call of it that its inputs are bound from
    #: (`call_sites.CallSite.to_json`), None: every input synthesized
    call_site: dict | None = None

    @property
    def mode(self) -> str:
        return {"script": "script", "driver": "driver"}.get(self.kind, "function")

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "original": self.original,
            "rewritten": self.rewritten,
            "qualname": self.qualname,
            "free_names": list(self.free_names),
            "problem": self.problem,
            "driver": self.driver,
            "targets": list(self.targets),
            "fallbacks": [unit.to_json() for unit in self.fallbacks],
            "script_changed": self.script_changed,
            "import_lines": [list(r) for r in self.import_lines],
            "caller_of": self.caller_of,
            "graph_inputs": [list(entry) for entry in self.graph_inputs],
            "call_site": self.call_site,
        }


class UnitError(ValueError):
    """A version does not parse, or `entry` names nothing."""


def _dump(node: ast.AST) -> str:
    return ast.dump(node, annotate_fields=False, include_attributes=False)


def _is_main_block(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _is_import(node: ast.stmt) -> bool:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(node, ast.Try):  # try: import x / except ImportError: ...
        return all(isinstance(s, (ast.Import, ast.ImportFrom, ast.Pass, ast.Assign)) for s in node.body)
    return False


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _assigned_names(node: ast.stmt) -> list[str]:
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    names = []
    for target in targets:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name):
                names.append(sub.id)
    return names


def _is_autograd_function(cls: ast.ClassDef) -> bool:
    for base in cls.bases:
        text = ast.unparse(base)
        if text in ("Function", "autograd.Function", "torch.autograd.Function", "torch.autograd.function.Function"):
            return True
    return False


def _is_script_statement(node: ast.stmt) -> bool:
    """Top-level code that does something when the file runs (not a definition)."""
    if _is_import(node) or _is_docstring(node) or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        value = node.value
        return value is not None and any(isinstance(sub, ast.Call) for sub in ast.walk(value))
    return True


class _Module:
    """Index of one version's top level."""

    def __init__(self, source: str, path: str, memo: SourceMemo | None = None) -> None:
        self.memo = memo or SourceMemo()
        try:
            self.tree = ast.parse(source, filename=path)
        except SyntaxError as exc:
            raise UnitError(f"{path}: does not parse: {exc.msg} (line {exc.lineno})") from exc
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.path = path
        self.defs: dict[str, ast.stmt] = {}
        self.methods: dict[tuple[str, str], ast.stmt] = {}
        self.class_bodies: dict[str, str] = {}
        self.script_parts: list[ast.stmt] = []
        self._symbols: dict[str, symtable.SymbolTable] | None = None
        self._import_time_names: set[str] | None = None
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.defs[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.defs[node.name] = node
                rest = []
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.methods[(node.name, item.name)] = item
                    else:
                        rest.append(_dump(item))
                self.class_bodies[node.name] = "|".join([*(_dump(b) for b in node.bases), *(_dump(d) for d in node.decorator_list), *rest])
            elif _is_main_block(node) or _is_script_statement(node):
                self.script_parts.append(node)

    def global_reads(self, qualname: str) -> set[str]:
        """Globals the function `qualname` reads (symtable knows exactly), builtins excluded.

        Asked of the definition's own text, remembered per statement: a symbol table of
        the whole file per patch made a file's verification quadratic in its findings."""
        head = qualname.split(".")[0]
        node = self.defs.get(head)
        if node is not None:
            reads = self.memo.reads(self.segment(node), node, self.path, qualname)
            if reads is not None:
                return set(reads)
        return self._module_reads(qualname)

    def _module_reads(self, qualname: str) -> set[str]:
        """The same answer from the whole file's symbol table (a definition whose text
        does not stand alone, or a name that is no top-level definition)."""
        if self._symbols is None:
            table = symtable.symtable(self.source, self.path, "exec")
            self._symbols = {}
            for child in table.get_children():
                self._symbols.setdefault(child.get_name(), child)
        head, *rest = qualname.split(".")
        current = self._symbols.get(head)
        for part in rest:
            if current is None:
                break
            current = next((c for c in current.get_children() if c.get_name() == part), None)
        return set() if current is None else set(global_reads(current))

    @property
    def is_script(self) -> bool:
        return bool(self.script_parts)

    def script_dump(self) -> str:
        return "|".join(_dump(node) for node in self.tree.body if _is_main_block(node) or _is_script_statement(node))

    def segment(self, node: ast.stmt) -> str:
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        return "".join(self.lines[start - 1 : node.end_lineno])

    def script_mentions(self, name: str) -> bool:
        for part in self.script_parts:
            for sub in ast.walk(part):
                if isinstance(sub, ast.Name) and sub.id == name:
                    return True
                if isinstance(sub, ast.Attribute) and sub.attr == name:
                    return True
        return False

    def reduced(self, needed_roots: set[str]) -> str:
        """Imports, every def/class, and the top-level assignments reachable from roots."""
        assigns: list[tuple[ast.stmt, list[str]]] = []
        for node in self.tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and not _is_main_block(node):
                assigns.append((node, _assigned_names(node)))
        needed = set(needed_roots)
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                needed |= self.def_reads(node)
        chosen: set[int] = set()
        changed = True
        while changed:
            changed = False
            for index, (node, names) in enumerate(assigns):
                if index not in chosen and needed.intersection(names):
                    chosen.add(index)
                    needed |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                    changed = True
        keep_assign = {id(assigns[i][0]) for i in chosen}
        parts = []
        for node in self.tree.body:
            if _is_import(node) or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or id(node) in keep_assign:
                parts.append(self.segment(node).rstrip("\n") + "\n")
        return "".join(parts)

    def def_reads(self, node: ast.stmt) -> set[str]:
        """Globals a definition reads: at definition time (decorators, bases, defaults,
        annotations) and in its body (per symtable: parameters and locals excluded)."""
        at_definition: list[ast.AST] = list(getattr(node, "decorator_list", []))
        if isinstance(node, ast.ClassDef):
            at_definition += [*node.bases, *(k.value for k in node.keywords)]
        else:
            at_definition += [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
        names = {n.id for part in at_definition for n in ast.walk(part) if isinstance(n, ast.Name)}
        try:
            names |= self.global_reads(node.name)
        except SyntaxError:  # pragma: no cover - parsed already
            pass
        return names

    def import_lines(self) -> tuple[tuple[int, int], ...]:
        """Lines of top-level code outside ``__main__`` blocks: importing the module runs it."""
        return tuple((n.lineno, n.end_lineno or n.lineno) for n in self.script_parts if not _is_main_block(n))

    def has_main_block(self) -> bool:
        return any(_is_main_block(node) for node in self.tree.body)

    def import_time_names(self) -> set[str]:
        """Names the module defines when imported (everything but ``__main__`` blocks);
        computed once per module, from answers remembered per statement."""
        if self._import_time_names is None:
            names: set[str] = set()
            for node in self.tree.body:
                if not _is_main_block(node):
                    names |= self.memo.bound_names(self.segment(node), node)
            self._import_time_names = names
        return self._import_time_names

    def defined_names(self, reduced_source: str) -> set[str]:
        tree = ast.parse(reduced_source)
        names: set[str] = set()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.Try):
                for sub in ast.walk(node):
                    if isinstance(sub, (ast.Import, ast.ImportFrom)):
                        names |= {(a.asname or a.name).split(".")[0] for a in sub.names}
            names |= set(_assigned_names(node))
        return names


def _function_unit(orig: _Module, rew: _Module, name: str, kind: str, qualname: str) -> Unit:
    """The changed function alone: the real module imported, its free names bound."""
    free: set[str] = set()
    if kind != "autograd_function":
        for module in (orig, rew):
            try:
                free |= module.global_reads(qualname) - module.import_time_names()
            except SyntaxError:  # pragma: no cover - already parsed once
                pass
    return Unit(
        name=name,
        kind=kind,
        original=orig.source,
        rewritten=rew.source,
        qualname=qualname,
        free_names=tuple(sorted(free)),
        driver=function_label(kind, qualname),
    )


def _script_unit(orig: _Module, rew: _Module, fallbacks: tuple[Unit, ...] = (), script_changed: bool = True) -> Unit:
    return Unit(
        name=MAIN_KEY,
        kind="script",
        original=orig.source,
        rewritten=rew.source,
        driver=script_label(orig.has_main_block() or rew.has_main_block()),
        targets=tuple(u.qualname for u in fallbacks if u.qualname),
        fallbacks=tuple(fallbacks),
        script_changed=script_changed,
        import_lines=orig.import_lines(),
    )


def _same_statements(orig: _Module, rew: _Module, a: list[ast.stmt], b: list[ast.stmt]) -> bool:
    """Whether two statement lists have equal syntax trees; equal source text settles it
    without dumping trees (a dump per statement per patch grew with the file's size)."""
    if len(a) != len(b):
        return False
    return all(orig.segment(x) == rew.segment(y) or _dump(x) == _dump(y) for x, y in zip(a, b))


def _command_unit(orig: _Module, rew: _Module, command: Command, fallbacks: list[Unit], module_changed: bool) -> Unit:
    return Unit(
        name=command.label,
        kind="driver",
        original=orig.source,
        rewritten=rew.source,
        driver=command.label,
        command=command,
        targets=tuple(u.qualname for u in fallbacks if u.qualname),
        fallbacks=tuple(fallbacks),
        script_changed=module_changed,
    )


def find_units(
    original: str,
    rewritten: str,
    *,
    path: str = "<string>",
    entry: str | None = None,
    driver: Command | None = None,
    memo: SourceMemo | None = None,
) -> list[Unit]:
    """The units to run for this patch; empty when the two versions' ASTs are equal.

    A file with a script part gives one script unit whose fallbacks are the changed
    functions; a library file gives a `driver` unit when the project names one, else
    the function units themselves. A run that verifies many patches of one file passes
    one `memo`, so that each patch costs what it changed, not the size of the file."""
    memo = memo or SourceMemo()
    orig = memo.module(original, path, lambda: _Module(original, path, memo))
    rew = memo.module(rewritten, path, lambda: _Module(rewritten, path, memo))
    if entry is not None:
        return [_entry_unit(orig, rew, entry)]
    if _same_statements(orig, rew, orig.tree.body, rew.tree.body):
        return []

    units: list[Unit] = []
    need_script = orig.script_dump() != rew.script_dump()
    for key in list(dict.fromkeys([*orig.defs, *rew.defs])):
        a, b = orig.defs.get(key), rew.defs.get(key)
        if a is not None and b is not None and _same_statements(orig, rew, [a], [b]):
            continue
        if a is None or b is None or type(a) is not type(b):
            need_script = True  # added/removed definition: only the script can tell
            continue
        if isinstance(a, ast.ClassDef):
            assert isinstance(b, ast.ClassDef)
            if _is_autograd_function(a) or _is_autograd_function(b):
                unit = _function_unit(orig, rew, key, "autograd_function", key)
                units.append(replace(unit, graph_inputs=graph_inputs(orig, key)))
                continue
            if orig.class_bodies.get(key) != rew.class_bodies.get(key):
                need_script = True
                continue
            for (cls, meth) in dict.fromkeys([*orig.methods, *rew.methods]):
                if cls != key:
                    continue
                ma, mb = orig.methods.get((cls, meth)), rew.methods.get((cls, meth))
                if ma is None or mb is None:
                    need_script = True
                elif not _same_statements(orig, rew, [ma], [mb]):
                    units.append(_function_unit(orig, rew, f"{cls}.{meth}", "method", f"{cls}.{meth}"))
        else:
            units.append(_function_unit(orig, rew, key, "function", key))
    command_unit = _command_unit(orig, rew, driver, units, need_script or not units) if driver is not None else None
    if orig.is_script or rew.is_script:
        fallbacks = [command_unit] if command_unit is not None else units
        script = _script_unit(orig, rew, tuple(units), need_script or not units)
        return [replace(script, fallbacks=tuple(fallbacks))]
    if command_unit is not None:
        return [command_unit]
    units += _caller_units(orig, rew, units)
    if not units:
        units.append(
            Unit(
                name="<module>",
                kind="script",
                original=original,
                rewritten=rewritten,
                problem="only imports or module-level definitions changed and the file has no script part; "
                "name a unit with --entry, or a `driver` in [tool.autograd-fix.verify]",
            )
        )
    return units


def drive_units(units: list[Unit], commands: list[Command]) -> list[Unit]:
    """The units of a library file whose project has drivers of its changed functions
    (`found_drivers`): one driver unit, falling back to the next driver found and at last
    to the functions with synthesized inputs; same-file callers are not needed then (the
    project's own code calls the function), custom Functions keep their own units."""
    changed = [u for u in units if u.kind in ("function", "method") and u.caller_of is None]
    if not changed or not commands:
        return units
    chain: tuple[Unit, ...] = tuple(changed)
    for command in reversed(commands):
        driver = Unit(
            name=command.label, kind="driver", original=changed[0].original, rewritten=changed[0].rewritten,
            driver=command.label, command=command, targets=tuple(u.qualname for u in changed if u.qualname),
            fallbacks=chain, notes=(command.found,),
        )
        chain = (driver,)
    return [*chain, *(u for u in units if u.kind == "autograd_function")]


#: at most this many callers are run per patch (each costs two runs)
MAX_CALLER_UNITS = 3


def _caller_units(orig: _Module, rew: _Module, changed: list[Unit]) -> list[Unit]:
    """Same-file callers of the changed functions, for a file without a driver.

    A library file's function unit runs the changed function alone, which cannot show
    what the change breaks for its callers: `@torch.no_grad()` on a helper that a
    `train_step` also calls and backpropagates through leaves the helper's own outputs
    equal, yet the training step now raises. Running the callers too catches that."""
    done = {unit.qualname for unit in changed}
    found: list[Unit] = []
    for unit in changed:
        if unit.kind not in ("function", "method") or unit.qualname is None:
            continue
        for caller, kind in _callers_of(orig, unit.qualname):
            if caller in done or len(found) >= MAX_CALLER_UNITS:
                continue
            done.add(caller)
            found.append(replace(_function_unit(orig, rew, caller, kind, caller), caller_of=unit.qualname))
    return found


def _callers_of(module: _Module, qualname: str) -> list[tuple[str, str]]:
    """(qualname, kind) of the functions, and methods of the same class, that call `qualname`
    directly: `name(...)` for a function, `self.name(...)` for a method."""
    cls, _, name = qualname.rpartition(".")
    if cls:
        return [
            (f"{owner}.{method}", "method")
            for (owner, method), node in module.methods.items()
            if owner == cls and method != name and name in module.memo.calls(module.segment(node), node).on_self
        ]
    return [
        (key, "function")
        for key, node in module.defs.items()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and key != name
        and name in module.memo.calls(module.segment(node), node).plain
    ]


def _module_classes(tree: ast.Module) -> frozenset[str]:
    """The file's top-level classes that are certainly `nn.Module`s, answered by the
    rules' own functions (`codemods/semantic/module_bases.py`, libcst-free) on this `ast`
    reading: a base torch names a module (`nn.Module`, `nn.Sequential`, a same-file module
    class), or a base this file cannot see and a class whose own code is a module's."""
    aliases = _import_aliases(tree)
    answers: dict[str, Answer] = {}
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        bases = []
        for base in cls.bases:
            name = _dotted(base)
            head, _, rest = (name or "").partition(".")
            qualified = f"{aliases[head]}.{rest}".rstrip(".") if head in aliases else None
            bases.append(base_answer(qualified, name, answers))
        answers[cls.name] = class_answer(bases, _acts_as_module(cls))
    return frozenset(name for name, answer in answers.items() if answer is Answer.YES)


def _import_aliases(tree: ast.Module) -> dict[str, str]:
    """Top-level import bindings: `nn` -> `torch.nn`, `Module` -> `torch.nn.Module`."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                found[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return found


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        owner = _dotted(node.value)
        return f"{owner}.{node.attr}" if owner is not None else None
    return None


def _acts_as_module(cls: ast.ClassDef) -> bool:
    """The class defines `forward`, or calls a method only a module has on `self`."""
    if any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "forward" for s in cls.body):
        return True
    return any(
        isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in MODULE_ONLY_METHODS
        and isinstance(call.func.value, ast.Name) and call.func.value.id == "self"
        for call in ast.walk(cls)
    )


def _parameter_attributes(cls: ast.ClassDef) -> set[str]:
    """``self.name`` attributes the class assigns an ``nn.Parameter(...)``."""
    found: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            if ast.unparse(node.value.func).split(".")[-1] != "Parameter":
                continue
            for target in node.targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                    found.add(target.attr)
    return found


def graph_inputs(module: _Module, function: str) -> tuple[tuple[int, str], ...]:
    """Positions of `function`.apply(...) arguments that this file's own modules fill with
    a value that carries a graph: derived from a module ``forward``'s input (in any
    network that stacks the module, the previous layer's output) or from a parameter the
    module registers. Static evidence for what a synthesized run cannot tell: whether
    an input of the Function needs its gradient."""
    found: dict[int, str] = {}
    modules = _module_classes(module.tree)
    for cls in module.tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name in modules):
            continue
        parameters = _parameter_attributes(cls)
        for method in cls.body:
            if not (isinstance(method, ast.FunctionDef) and method.name == "forward"):
                continue
            inputs = {arg.arg for arg in method.args.args[1:]}
            for call in ast.walk(method):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "apply"):
                    continue
                if ast.unparse(call.func.value).split(".")[-1] != function:
                    continue
                for position, arg in enumerate(call.args):
                    why = _carries_graph(arg, inputs, parameters)
                    if why and position not in found:
                        found[position] = f"`{ast.unparse(arg)}` in {cls.name}.forward (line {call.lineno}), {why}"
    return tuple(sorted(found.items()))


def _carries_graph(arg: ast.expr, inputs: set[str], parameters: set[str]) -> str | None:
    for node in ast.walk(arg):
        if isinstance(node, ast.Name) and node.id in inputs:
            return f"derived from the module's input `{node.id}`"
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in parameters:
            return f"the module's parameter `self.{node.attr}`"
    return None


def _entry_unit(orig: _Module, rew: _Module, entry: str) -> Unit:
    if entry in SCRIPT_ENTRIES:
        return _script_unit(orig, rew)
    parts = entry.split(".")
    if len(parts) == 1:
        node = orig.defs.get(entry) or rew.defs.get(entry)
        if node is None:
            raise UnitError(f"--entry {entry}: no function or class of that name in the file")
        if isinstance(node, ast.ClassDef):
            if _is_autograd_function(node):
                return _function_unit(orig, rew, entry, "autograd_function", entry)
            raise UnitError(f"--entry {entry}: a class; name one of its methods as {entry}.method")
        return _function_unit(orig, rew, entry, "function", entry)
    if len(parts) == 2 and ((parts[0], parts[1]) in orig.methods or (parts[0], parts[1]) in rew.methods):
        return _function_unit(orig, rew, entry, "method", entry)
    raise UnitError(f"--entry {entry}: no method of that name in the file")
