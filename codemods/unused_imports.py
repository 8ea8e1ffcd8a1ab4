"""Imports a fix left unused, removed: a fixed file gives Ruff's F401 nothing new.

AGF012 turns `Variable(x)` into `x.detach()` and the AMP rules `torch.cuda.amp.autocast`
into `torch.amp.autocast`; the `from torch.autograd import Variable` that served only the
old call would stay behind, unused, and the next linter in the user's pipeline would
flag (or delete) it. So after each fix pass (`engine.apply_fixes`, the one place every
rewrite goes through) an import name is dropped when:

- the fixes' edits covered a use of it (a name no edit touched is none of our business:
  an import unused in the input stays, as the user wrote it);
- no use of it remains anywhere in the rewritten module: no `Name` of that spelling in
  any scope (a parameter or local of that name counts too, to err on keeping; only an
  attribute, `torch.amp`, and a keyword, `f(amp=...)`, do not), and no string that
  contains it as a word (`__all__ = ["Variable"]`, a string annotation) but a
  docstring (prose: Ruff does not count it either);
- its import is absolute, not a star import, not in a `try` body (a compatibility
  shim) or a class body (an attribute, `self.name`), and carries no `# noqa` (the user
  keeps it on purpose).

The name goes from its statement (`from torch.autograd import Variable, grad` keeps
`grad`); a statement left with no names goes, and its comments move to the next
statement (a statement with comments and nothing after it stays).
"""

from __future__ import annotations

import ast
import re
import warnings
from collections import Counter
from pathlib import Path
from typing import Collection, Iterable, Sequence

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.model import Fix
from autograd_fix.codemods.walk import children_of

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NOQA = re.compile(r"#\s*noqa\b", re.I)
_IMPORTS = (cst.Import, cst.ImportFrom)
_STRINGS = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)


def drop_orphaned_imports(before: cst.Module, after: cst.Module, fixes: Sequence[Fix]) -> cst.Module:
    """`after` (`before` with `fixes` applied) without the import names the fixes left
    unused (see the module docstring for when a name counts as that)."""
    touched = touched_names(fixes)
    candidates = set(touched) & imported_names(before)
    if not candidates:
        return after
    used = uses(before, candidates)
    # a use outside the edited nodes is still there: only names whose every use the
    # fixes touched can have gone (the rewritten tree is walked for those alone)
    candidates = {name for name in candidates if 0 < used[name] <= touched[name]}
    if not candidates:
        return after
    remaining = uses(after, candidates)
    orphaned = frozenset(name for name in candidates if not remaining[name])
    if not orphaned:
        return after
    return after.visit(_Pruner(orphaned))


def drop_newly_unused_imports(original: str, fixed: str, path: str | None = None) -> str:
    """`fixed` without the import names that `original` uses and `fixed` uses nowhere,
    unless another file may import them from this one.

    It runs once on a file's final text, in the static path (`engine.check_source`) and
    the verified one (`cli.verify_patches`) alike, so both write the same bytes; a name
    unused in `original` stays, as the user wrote it. An imported name is also a name of
    the module: `from model import *` in a sibling `train.py` reads `Variable` from
    `model.py` (spro/practical-pytorch does exactly that), so a name another Python file
    near this one may import from it (`reimported`) stays too, and without a `path` none
    is dropped. Text that does not parse is returned as it is."""
    if fixed == original or path is None:
        return fixed
    orphaned = _orphans(original, fixed)
    if orphaned:
        orphaned -= reimported(path, orphaned)
    if not orphaned:
        return fixed
    try:  # one libcst parse, of the text that is pruned, and only when a name can go
        after = cst.parse_module(fixed)
    except cst.ParserSyntaxError:
        return fixed
    return after.visit(_Pruner(frozenset(orphaned))).code


#: at most this many files are read to see whether a module's names are imported elsewhere
MAX_NEIGHBOURS = 2000


def reimported(path: str, names: Collection[str]) -> set[str]:
    """Of `names`, those another Python file may import from the module at `path`: every
    name when a file star-imports it or imports the module itself (`model.Variable`), the
    named ones for `from model import Variable`. Files are looked for in the module's
    project (`project_index.project_root`: the nearest folder with a project marker, else
    the module's own folder); more than `MAX_NEIGHBOURS` files, or a file that cannot be
    read, counts as importing every name (keeping an import is the safe side)."""
    module = Path(path).resolve()
    if not module.is_file():  # text with a name only (stdin, an in-memory check): no neighbours to ask
        return set()
    stem = module.stem
    pattern = re.compile(
        rf"^\s*(?:from\s+[\w.]*\b{re.escape(stem)}\s+import\s+(?P<what>[^#\n]+(?:\n[^#\n)]*\))?)"
        rf"|import\s+[\w.]*\b{re.escape(stem)}\b)",
        re.M,
    )
    found: set[str] = set()
    read = 0
    from autograd_fix.codemods.project_index import project_root, python_files

    try:
        candidates = python_files(project_root([module]) or module.parent)
    except (RecursionError, OSError):  # a tree too deep to walk: keep every import
        return set(names)
    for candidate in candidates:
        if candidate == module:
            continue
        read += 1
        if read > MAX_NEIGHBOURS:
            return set(names)
        try:
            text = candidate.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return set(names)
        if stem not in text:
            continue
        for match in pattern.finditer(text):
            what = match.group("what")
            if what is None or "*" in what:
                return set(names)
            found |= set(names) & set(_WORD.findall(what))
    return found



def _orphans(original: str, fixed: str) -> set[str]:
    """The names `fixed` still imports that `original` uses outside its imports and
    `fixed` uses nowhere, read with CPython's parser (no libcst parse for the many files
    where there are none). Names and string words count as `uses` counts them:
    docstrings are prose."""
    try:
        with warnings.catch_warnings():  # `0x1for`: a SyntaxWarning is the user's, not ours to print
            warnings.simplefilter("ignore")
            before, after = ast.parse(original), ast.parse(fixed)
    except (SyntaxError, ValueError, RecursionError):
        return set()

    def words(tree: ast.AST) -> tuple[set[str], set[str]]:
        imported: set[str] = set()
        seen: set[str] = set()
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level:
                imported.update(alias.asname or alias.name for alias in node.names if alias.name != "*")
            elif isinstance(node, ast.Import):
                imported.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.Name):
                seen.add(node.id)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                seen.update(_WORD.findall(node.value))
        return imported, seen

    _, seen_before = words(before)
    imported_after, seen_after = words(after)
    return {name for name in imported_after if name in seen_before and name not in seen_after}


def touched_names(fixes: Iterable[Fix]) -> Counter[str]:
    """The uses of each name inside the nodes `fixes` edit (in the original tree): what the
    fixes can take away (an edit inside another's target counts twice: erring on more)."""
    counts: Counter[str] = Counter()
    for fix in fixes:
        for edit in fix.edits:
            counts.update(uses(edit.target))
    return counts


def may_orphan(import_uses: Counter[str], touched: Iterable[Counter[str]]) -> bool:
    """Could fixes that touch these uses leave an import unused? `import_uses`: the
    module's uses of its imported names (`uses(module, imported_names(module))`). A
    composition that statement by statement cannot see an import go asks this first."""
    total: Counter[str] = Counter()
    for counts in touched:
        total.update(counts)
    return any(total[name] >= count for name, count in import_uses.items() if count)


def bound_name(alias: cst.ImportAlias, statement: cst.Import | cst.ImportFrom) -> str | None:
    """The local name one alias binds (`import a.b` binds `a`); None when it cannot be read."""
    if alias.asname is not None:
        return alias.asname.name.value if type(alias.asname.name) is cst.Name else None
    name = dotted_name(alias.name)
    if name is None:
        return None
    return name.split(".", 1)[0] if type(statement) is cst.Import else name


def imported_names(module: cst.Module) -> set[str]:
    """The names the module's absolute imports bind, in its statements at any depth."""
    return set(ImportIndex.from_module(module).bindings)


def uses(node: cst.CSTNode, names: Collection[str] | None = None) -> Counter[str]:
    """How often each name (of `names`, or all) is used under `node` outside import
    statements: as a `Name` that can refer to a binding (not the attribute of
    `torch.amp`, not the keyword of `f(amp=...)`), or as a word of a string that is not a
    docstring (`__all__`, string annotations)."""
    counts: Counter[str] = Counter()
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        node_type = type(current)
        if node_type is cst.Name:
            if names is None or current.value in names:  # type: ignore[attr-defined]
                counts[current.value] += 1  # type: ignore[attr-defined]
        elif node_type is cst.SimpleString or node_type is cst.FormattedStringText:
            counts.update(word for word in _WORD.findall(current.value) if names is None or word in names)  # type: ignore[attr-defined]
        elif node_type is cst.Expr and type(current.value) in _STRINGS:  # type: ignore[attr-defined]
            continue  # a docstring: prose, as for Ruff
        elif node_type is cst.Attribute:
            stack.append(current.value)  # type: ignore[attr-defined]
        elif node_type is cst.Arg:
            stack.append(current.value)  # type: ignore[attr-defined]
        elif node_type is not cst.Import and node_type is not cst.ImportFrom:
            stack.extend(children_of(current))
    return counts


class _Pruner(cst.CSTTransformer):
    """Removes `orphaned` names from the import statements of statement bodies: the
    module's and every indented block's but a `try` body's (a compatibility shim) and a
    class body's (its names are attributes, read as `self.name`). A block the removal
    would leave empty keeps its imports."""

    def __init__(self, orphaned: frozenset[str]) -> None:
        super().__init__()
        self.orphaned = orphaned
        self._kept_blocks: set[int] = set()

    def visit_Try(self, node: cst.Try) -> None:
        self._kept_blocks.add(id(node.body))

    def visit_TryStar(self, node: cst.TryStar) -> None:
        self._kept_blocks.add(id(node.body))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._kept_blocks.add(id(node.body))

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        return updated_node.with_changes(body=self._pruned(updated_node.body))

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        if id(original_node) in self._kept_blocks:
            return updated_node
        body = self._pruned(updated_node.body)
        return updated_node.with_changes(body=body) if body else updated_node

    def _pruned(self, body: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
        statements = list(body)
        result: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] | None = None  # the leading lines of a removed statement
        for index, statement in enumerate(statements):
            kept = self._line(statement) if type(statement) is cst.SimpleStatementLine else statement
            if kept is None:
                moved = _comment_lines(statement)  # type: ignore[arg-type]
                has_comments = any(line.comment is not None for line in moved)
                if has_comments and index + 1 == len(statements):
                    kept = statement  # its comments have nowhere to go
                else:
                    carried = [*(carried or []), *moved]
                    continue
            if carried is not None:
                kept = _with_carried(kept, carried, first=not result)
                carried = None
            result.append(kept)
        return result

    def _line(self, line: cst.SimpleStatementLine) -> cst.SimpleStatementLine | None:
        """The line without orphaned names; None when nothing is left of it."""
        comment = line.trailing_whitespace.comment
        if comment is not None and _NOQA.search(comment.value):
            return line
        body: list[cst.BaseSmallStatement] = []
        for small in line.body:
            if isinstance(small, _IMPORTS):
                small = self._statement(small)
            if small is not None:
                body.append(small)
        if len(body) == len(line.body) and all(a is b for a, b in zip(body, line.body)):
            return line
        if not body:
            return None
        body[-1] = body[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return line.with_changes(body=body)

    def _statement(self, statement: cst.Import | cst.ImportFrom) -> cst.Import | cst.ImportFrom | None:
        if type(statement.names) is cst.ImportStar:
            return statement
        if type(statement) is cst.ImportFrom and (statement.relative or statement.module is None):
            return statement
        names = list(statement.names)
        kept = [alias for alias in names if bound_name(alias, statement) not in self.orphaned]
        if len(kept) == len(names):
            return statement
        if not kept:
            return None
        kept[-1] = kept[-1].with_changes(comma=names[-1].comma)
        return statement.with_changes(names=kept)


def _comment_lines(line: cst.SimpleStatementLine) -> list[cst.EmptyLine]:
    """A removed line's leading lines, and its own end-of-line comment as a line."""
    moved = list(line.leading_lines)
    comment = line.trailing_whitespace.comment
    if comment is not None:
        moved.append(cst.EmptyLine(comment=comment))
    return moved


def _with_carried(statement: cst.BaseStatement, carried: Iterable[cst.EmptyLine], first: bool) -> cst.BaseStatement:
    """`statement` after a removed one: it takes the removed one's comments; with none to
    take, the blank lines before it stay what they were above the removed statement (the
    blank line after a docstring, between import groups) unless it has its own, and a
    statement that is now `first` in its body has no blank lines before it (as a
    formatter leaves a file or a block)."""
    carried = list(carried)
    own = list(statement.leading_lines)  # type: ignore[attr-defined]
    if any(line.comment is not None for line in carried):
        return statement.with_changes(leading_lines=[*carried, *own])
    if first:
        while own and own[0].comment is None:
            own.pop(0)
        return statement.with_changes(leading_lines=[*carried, *own])
    return statement if own else statement.with_changes(leading_lines=carried)
