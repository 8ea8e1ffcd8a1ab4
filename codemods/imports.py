"""Qualified names from a module's imports, without libcst's (slow) scope analysis.

Rules match `torch.no_grad`, not the text `no_grad`: `import torch as T`,
`from torch import no_grad as ng`, `import torch.nn.functional as F` all resolve.
Only module-level and function-level import statements are read; a local variable that
shadows an imported name is not tracked (a documented limitation: rules fail closed on
anything they cannot resolve).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from autograd_fix.codemods.walk import iter_children
from autograd_fix.codemods.walk import walk

if TYPE_CHECKING:
    from autograd_fix.codemods.project_index import ProjectView


def dotted_name(node: cst.BaseExpression) -> str | None:
    """`a.b.c` for Name/Attribute chains, None for anything else (calls, subscripts)."""
    # exact type tests: both are concrete node classes, and `isinstance` against libcst's
    # ABC-based classes costs a Python-level call each (this runs ~1k times per file)
    parts: list[str] = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)  # type: ignore[attr-defined]
        node = node.value  # type: ignore[attr-defined]
    if type(node) is cst.Name:
        parts.append(node.value)  # type: ignore[attr-defined]
        return ".".join(reversed(parts))
    return None


def _module_name(node: cst.BaseExpression) -> str:
    name = dotted_name(node)
    if name is None:  # pragma: no cover - libcst only puts Name/Attribute here
        raise ValueError("unexpected import target")
    return name


@dataclass
class ImportIndex:
    """Maps local names bound by imports to the fully qualified names they denote."""

    bindings: dict[str, str] = field(default_factory=dict)
    #: what the file's names mean in its project (`project_index`), when a run built the
    #: project index: the project's own grad-disabling decorators and context managers
    project: "ProjectView | None" = None

    @classmethod
    def from_module(cls, module: cst.Module) -> "ImportIndex":
        """Index every import statement, walking statements only (no expressions).

        Imports sit in statement position (module, function and class bodies, `if`,
        `try`, `with`), so skipping expressions keeps this pass cheap on large files.
        """
        index = cls()
        collector = _ImportCollector(index)
        pending: list[cst.CSTNode] = list(reversed(module.body))  # a stack, in source order
        while pending:
            statement = pending.pop()
            if type(statement) is cst.SimpleStatementLine:
                for small in statement.body:
                    if type(small) in (cst.Import, cst.ImportFrom):
                        walk(small, collector)
            else:
                pending.extend(reversed(_nested_statements(statement)))
        return index

    def qualified_name(self, node: cst.BaseExpression) -> str | None:
        """Fully qualified name of a Name/Attribute chain, through import aliases.

        Returns None when the head of the chain is not bound by an import (a local
        variable, `self`, a parameter): such names are never claimed to be torch APIs.
        """
        # the chain's head first: most chains a rule asks about start at a local name
        # (`self`, a model, a tensor), answered without spelling the whole chain
        head = node
        while type(head) is cst.Attribute:
            head = head.value  # type: ignore[attr-defined]
        if type(head) is not cst.Name:
            return None
        target = self.bindings.get(head.value)  # type: ignore[attr-defined]
        if target is None:
            return None
        name = dotted_name(node)
        assert name is not None  # a Name under Attributes only: dotted_name spells it
        _, _, rest = name.partition(".")
        return f"{target}.{rest}" if rest else target

    def is_name(self, node: cst.BaseExpression, *qualified: str) -> bool:
        return self.qualified_name(node) in qualified

    def local_name_for(self, qualified: str) -> str | None:
        """Shortest local spelling of `qualified` through existing imports, if any."""
        best: str | None = None
        for local, target in self.bindings.items():
            if qualified == target:
                candidate = local
            elif qualified.startswith(target + "."):
                candidate = local + qualified[len(target):]
            else:
                continue
            if best is None or len(candidate) < len(best):
                best = candidate
        return best

    def expression_for(self, qualified: str) -> tuple[cst.BaseExpression, tuple[str, ...]]:
        """An expression naming `qualified`, and the imports it needs (if any).

        Prefers what the file already imports (`T.no_grad` under `import torch as T`,
        `no_grad` under `from torch import no_grad`); otherwise spells it from the top
        package and asks for `import <package>`.
        """
        local = self.local_name_for(qualified)
        needs: tuple[str, ...] = ()
        if local is None:
            local = qualified
            top = qualified.split(".", 1)[0]
            needs = (f"import {top}",)
        return cst.parse_expression(local), needs


def _nested_statements(statement: cst.CSTNode) -> list[cst.CSTNode]:
    """Statements directly inside a compound statement (bodies, else/except/finally)."""
    found: list[cst.CSTNode] = []
    for child in iter_children(statement):
        if isinstance(child, cst.BaseSuite):
            body = child.body
            found.extend(body if isinstance(body, (list, tuple)) else [])
            if type(child) is cst.SimpleStatementSuite:
                found.append(cst.SimpleStatementLine(body=child.body))
        elif isinstance(child, (cst.BaseCompoundStatement, cst.ExceptHandler, cst.ExceptStarHandler, cst.Else, cst.Finally, cst.If)):
            found.append(child)
    return found


class _ImportCollector(cst.CSTVisitor):
    def __init__(self, index: ImportIndex) -> None:
        self.index = index

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            full = _module_name(alias.name)
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                self.index.bindings[alias.asname.name.value] = full
            else:
                # `import torch.nn` binds `torch` to the top package.
                top = full.split(".", 1)[0]
                self.index.bindings.setdefault(top, top)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if node.relative or node.module is None or type(node.names) is cst.ImportStar:
            return False
        base = _module_name(node.module)
        for alias in node.names:
            imported = _module_name(alias.name)
            local = imported
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                local = alias.asname.name.value
            self.index.bindings[local] = f"{base}.{imported}"
        return False


def add_imports(module: cst.Module, statements: tuple[str, ...] | list[str]) -> cst.Module:
    """Insert `import x` statements the module lacks, next to its existing imports.

    New imports go before the first top-level import (after the docstring and any
    `from __future__` imports), so they read as part of the import block.
    """
    index = ImportIndex.from_module(module)
    missing: list[str] = []
    for statement in dict.fromkeys(statements):
        parsed = cst.parse_statement(statement)
        node = parsed.body[0] if type(parsed) is cst.SimpleStatementLine else None
        if type(node) is cst.Import and all(
            alias.asname is None and _module_name(alias.name) in index.bindings for alias in node.names
        ):
            continue
        missing.append(statement)
    if not missing:
        return module
    body = list(module.body)
    position = _insertion_point(body)
    new_lines = [cst.parse_statement(s) for s in missing]
    if position < len(body) and not _is_import(body[position]) and not body[position].leading_lines:
        # no import block to join: separate the new imports from the code (PEP 8)
        following = body[position]
        blank_lines = 2 if type(following) in (cst.FunctionDef, cst.ClassDef) else 1
        body[position] = following.with_changes(leading_lines=[cst.EmptyLine()] * blank_lines)
    if position < len(body) and _is_import(body[position]):
        # take over the leading comments/blank lines of the first import
        first = body[position]
        new_lines[0] = new_lines[0].with_changes(leading_lines=first.leading_lines)
        body[position] = first.with_changes(leading_lines=())
    body[position:position] = new_lines
    return module.with_changes(body=body)


def _is_import(statement: cst.CSTNode) -> bool:
    return type(statement) is cst.SimpleStatementLine and any(
        type(s) in (cst.Import, cst.ImportFrom) for s in statement.body
    )


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        type(statement) is cst.SimpleStatementLine
        and len(statement.body) == 1
        and type(statement.body[0]) is cst.Expr
        and type(statement.body[0].value) in (cst.SimpleString, cst.ConcatenatedString)
    )


def _is_future_import(statement: cst.CSTNode) -> bool:
    return (
        type(statement) is cst.SimpleStatementLine
        and any(
            type(s) is cst.ImportFrom and s.module is not None and dotted_name(s.module) == "__future__"
            for s in statement.body
        )
    )


def _insertion_point(body: list[cst.BaseStatement]) -> int:
    position = 0
    if body and _is_docstring(body[0]):
        position = 1
    while position < len(body) and _is_future_import(body[position]):
        position += 1
    for index in range(position, len(body)):
        if _is_import(body[index]):
            return index
        break
    return position
