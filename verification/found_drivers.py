"""Drivers found in the project for a changed library function (issue 17, item 2).

A changed `Trainer.run` in ``pkg/trainer.py`` has no ``__main__`` of its own; the project
itself says how it runs: a ``train.py`` that imports the trainer and calls it, a console
entry point in ``[project.scripts]``, a test that builds a trainer. Synthesized inputs
cannot bind a ``config`` of unknown shape; the project's own driver needs none.

Found statically (`ast`, no import, no torch) under the project root:

* **scripts**: files that run something when executed (a ``__main__`` block, or top-level
  loops and calls: not a library that only assigns a logger) and that import the changed
  module (absolute, relative, ``from pkg import trainer``, or a package ``__init__`` that
  re-exports the name) and name the changed function or its class;
* **console entry points** of the root's ``pyproject.toml`` whose function's module is
  the changed one or imports it and names the function;
* **tests**: test functions (``test_*``, in ``test_*.py`` / ``*_test.py``) whose body names
  the imported function or class.

Static evidence only proposes: a driver judges the patch only when the line watch and
the reach tracer see the changed code run (`judging`), else the next one is tried, and
finally the function with synthesized inputs. At most `MAX_DRIVERS` are tried, scripts
with a ``__main__`` block first (those naming the method too before the others), then
scripts of top-level code, entry points, tests.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence


from .drivers import Command
from .shadow import SKIPPED_FOLDERS

MAX_DRIVERS = 3
MAX_FILES = 3000
MAX_FILE_BYTES = 1 << 20


@dataclass(frozen=True)
class _Names:
    """How one file refers to the changed module: names bound to its functions or classes,
    and aliases of the module itself."""

    members: frozenset[str]  # local names bound to a changed head (``Trainer``, ``T``)
    modules: frozenset[str]  # local names bound to the module (``trainer``, ``tr``)

    def __bool__(self) -> bool:
        return bool(self.members or self.modules)


def _python_files(root: str) -> Iterator[str]:
    count = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not (d.startswith(".") or d in SKIPPED_FOLDERS or d.endswith(".egg-info")
                                                 or os.path.isfile(os.path.join(folder, d, "pyvenv.cfg"))))
        for name in sorted(files):
            if name.endswith(".py"):
                count += 1
                if count > MAX_FILES:
                    return
                yield os.path.join(folder, name)


def _read(path: str) -> str | None:
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            return None
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def _module_file(base: str, dotted: str) -> str | None:
    stem = os.path.join(base, *dotted.split(".")) if dotted else base
    for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
    return None


def _resolve(importer: str, root: str, module: str | None, level: int) -> str | None:
    """The project file an import names, as ``python importer.py`` run from its folder
    (or the project root, or its ``src``) would find it."""
    if level:
        base = os.path.dirname(importer)
        for _ in range(level - 1):
            base = os.path.dirname(base)
        return _module_file(base, module or "")
    if not module:
        return None
    for base in (os.path.dirname(importer), root, os.path.join(root, "src")):
        found = _module_file(base, module)
        if found is not None:
            return found
    return None


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def _names(tree: ast.AST, importer: str, root: str, changed: str, heads: set[str], exporters: dict[str, set[str]]) -> _Names:
    members: set[str] = set()
    modules: set[str] = set()
    for node in _imports(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _resolve(importer, root, alias.name, 0) == changed:
                    # `import pkg.trainer` binds `pkg`; attribute uses name the head either way
                    modules.add(alias.asname or alias.name.split(".")[0])
            continue
        source = _resolve(importer, root, node.module, node.level)
        for alias in node.names:
            local = alias.asname or alias.name
            if source == changed and alias.name in heads:
                members.add(local)
            elif source is not None and alias.name in exporters.get(source, ()):
                members.add(local)
            elif source is not None and _module_file(os.path.dirname(source), alias.name) == changed:
                modules.add(local)  # from pkg import trainer
            elif source == changed and alias.name == "*":
                members.update(heads)
    return _Names(frozenset(members), frozenset(modules))


def _mentions(nodes: Iterable[ast.AST], names: _Names, heads: set[str]) -> bool:
    """Whether the code names a changed head: a bound name, or ``module.Head``."""
    for root in nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Name) and node.id in names.members and isinstance(node.ctx, ast.Load):
                return True
            if isinstance(node, ast.Attribute) and node.attr in heads and names.modules:
                base = node.value
                while isinstance(base, ast.Attribute):
                    base = base.value
                if isinstance(base, ast.Name) and base.id in names.modules:
                    return True
    return False


def _attribute_names(tree: ast.AST) -> set[str]:
    return {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}


def _is_main_block(node: ast.stmt) -> bool:
    test = getattr(node, "test", None)
    return (isinstance(node, ast.If) and isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
            and test.left.id == "__name__" and len(test.comparators) == 1
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == "__main__")


def _runs_something(tree: ast.Module) -> tuple[bool, bool]:
    """(has a ``__main__`` block, runs top-level loops or calls)."""
    main = any(_is_main_block(node) for node in tree.body)
    top = any(
        isinstance(node, (ast.For, ast.While, ast.With))
        or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call))
        for node in tree.body
    )
    return main, top


def _is_test_file(path: str) -> bool:
    name = os.path.basename(path)
    return name.startswith("test_") or name.endswith("_test.py")


def _test_nodes(tree: ast.Module, names: _Names, heads: set[str]) -> Iterator[str]:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            if _mentions([node], names, heads):
                yield node.name
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"):
                    if _mentions([item], names, heads):
                        yield f"{node.name}::{item.name}"


def _exporters(files: dict[str, ast.Module], root: str, changed: str, heads: set[str]) -> dict[str, set[str]]:
    """Package ``__init__`` files (or any module) that import a changed head from the
    changed module, with the names they bind it to: ``from pkg import Trainer`` works."""
    found: dict[str, set[str]] = {}
    for path, tree in files.items():
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and _resolve(path, root, node.module, node.level) == changed:
                for alias in node.names:
                    if alias.name in heads:
                        found.setdefault(path, set()).add(alias.asname or alias.name)
    return found


def _users_in_module(path: str, heads: set[str]) -> set[str]:
    """`heads` and the module's own definitions that name them, transitively: a changed
    ``Block.forward`` is reached through ``GPT``, which builds Blocks, and a script names
    only ``GPT``."""
    text = _read(path)
    try:
        tree = ast.parse(text or "", path)
    except (SyntaxError, ValueError):
        return heads
    uses = {
        node.name: {sub.id for sub in ast.walk(node) if isinstance(sub, ast.Name)}
        for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
    found = set(heads)
    grew = True
    while grew:
        grew = False
        for name, names in uses.items():
            if name not in found and names & found:
                found.add(name)
                grew = True
    return found


def _entry_points(root: str) -> list[tuple[str, str]]:
    from autograd_fix.compat import tomllib  # here: see worker_library
    try:
        with open(os.path.join(root, "pyproject.toml"), "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError):
        return []
    scripts = (data.get("project") or {}).get("scripts") or {}
    return [(name, value) for name, value in sorted(scripts.items()) if isinstance(value, str) and ":" in value]


def find_drivers(root: str, path: str, qualnames: Sequence[str], argv: Sequence[str] = ()) -> list[Command]:
    """The project's drivers of the changed functions `qualnames` of the file `path`, in
    the order they are tried (at most `MAX_DRIVERS`). A script gets `argv`, the project's
    configured ``argv`` (what its scripts need on this machine: ``--device=cpu``)."""
    root, changed = os.path.abspath(root), os.path.abspath(path)
    heads = {q.split(".")[0] for q in qualnames if q}
    methods = {q.split(".")[1] for q in qualnames if q and "." in q}
    if not heads or not changed.startswith(root + os.sep):
        return []
    heads = _users_in_module(changed, heads)
    stem = os.path.splitext(os.path.basename(changed))[0]
    if stem == "__init__":
        stem = os.path.basename(os.path.dirname(changed))
    trees: dict[str, ast.Module] = {}
    for file in _python_files(root):
        if file == changed:
            continue
        text = _read(file)
        if text is None or stem not in text:  # every import of the module spells its name
            continue
        try:
            trees[file] = ast.parse(text, file)
        except (SyntaxError, ValueError):
            continue
    exporters = _exporters(trees, root, changed, heads)
    if exporters:  # files that import a re-exporting package name the package, not the module
        for file in _python_files(root):
            if file != changed and file not in trees:
                text = _read(file)
                if text is not None and any(n in text for names in exporters.values() for n in names):
                    try:
                        trees[file] = ast.parse(text, file)
                    except (SyntaxError, ValueError):
                        continue
    ranked: list[tuple[tuple, Command]] = []
    for file, tree in trees.items():
        names = _names(tree, file, root, changed, heads, exporters)
        if not names:
            continue
        relative = os.path.relpath(file, root)
        depth = relative.count(os.sep)
        if _is_test_file(file):
            for node in list(_test_nodes(tree, names, heads))[:2]:
                node_id = f"{relative}::{node}"
                why = f"{relative} imports {stem} and its {node.split('::')[-1]} names {', '.join(sorted(heads))}"
                ranked.append(((3, depth, node_id), Command(node_id, "pytest", node_id, found=why, folder="")))
            continue
        main, top = _runs_something(tree)
        if not (main or top) or not _mentions([tree], names, heads):
            continue
        calls_method = not methods or bool(methods & _attribute_names(tree))
        why = f"{relative} imports {stem} and names {', '.join(sorted(heads))}"
        folder = os.path.dirname(relative)
        order = (0 if main else 1, 0 if calls_method else 1, depth, relative)
        text = " ".join([f"python {relative}", *argv])
        ranked.append((order, Command(text, "script", os.path.basename(relative), tuple(argv), found=why, folder=folder)))
    for name, value in _entry_points(root):
        module, _, function = value.partition(":")
        target = _resolve(os.path.join(root, "pyproject.toml"), root, module.strip(), 0)
        tree = trees.get(target) if target != changed else None
        reaches = target == changed and function.split(".")[0].strip() in heads
        if tree is not None:
            names = _names(tree, target, root, changed, heads, exporters)
            reaches = bool(names) and _mentions([tree], names, heads)
        if reaches:
            why = f"console script {name} = {value.strip()!r} reaches {', '.join(sorted(heads))}"
            ranked.append(((2, 0, name), Command(name, "entry", value.strip().replace(" ", ""), found=why, folder="")))
    ranked.sort(key=lambda item: item[0])
    return [command for _, command in ranked[:MAX_DRIVERS]]
