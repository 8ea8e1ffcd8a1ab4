"""Mechanical candidate search for benchmarks/recall_real (plain `ast`, no code of the tool).

Runs the hand-written patterns of `benchmarks/recall_search.py` over the extracted
snapshots and prints each candidate in the tool's own coordinates (`path:line` for a
file, `path:cell N:line L` for a notebook, N counting every cell from 1, as Jupyter and
the tool do), so that a person can read each one and write the real sites into
`sites/<owner>+<name>.toml` before the tool is run.

Differences from recall_search.py: a notebook cell that does not parse (an exercise
placeholder, a stray magic) is left out and the other cells are searched, instead of
losing the whole notebook; `--context N` prints N source lines around each candidate.

    python benchmarks/recall_real/candidates.py [--work /tmp/agf-recall] [--repo owner/name] [--context 3]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_search import SEARCHES, decorated_off, dotted, grad_off_lines, method_calls, python_files, scopes  # noqa: E402
from snapshots import load_repos  # noqa: E402


@dataclass(frozen=True)
class Program:
    """A file's searchable program and where each of its lines comes from."""

    text: str
    origin: list[tuple[int | None, int]]  # per program line (0-based): (cell number or None, line)


CUTS = frozenset({"item", "argmax", "numpy", "tolist", "max", "data", "detach", "multinomial", "sample"})
TRAINS = ("backward", "step", "grad")


def cut(expr: ast.AST | None, scope: ast.AST | None = None) -> bool:
    """A returned value with no graph: `.item()`, `argmax`, `.max(1)[1]`, `.data`, a
    number, a tuple of such, a name every assignment in `scope` gives such a value."""
    if expr is None or isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Tuple):
        return all(cut(e, scope) for e in expr.elts)
    if isinstance(expr, ast.Name) and scope is not None:
        values = [
            a.value for a in ast.walk(scope) if isinstance(a, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == expr.id for t in a.targets)
        ]
        return bool(values) and all(cut(v) or "random" in ast.unparse(v) for v in values)
    text = ast.unparse(expr)
    return any(f".{word}" in text or f"{word}(" in text for word in CUTS)


def agf001_cut_return(path: Path, tree: ast.Module):
    """AGF001 (added here): a function that runs `self(...)`, `self.forward(...)` or a
    model-named callable, trains nothing, is not under no_grad, and returns only values
    cut from the graph (an RL `act()`, a greedy decoder, a `predict`)."""
    for scope, chain in scopes(tree):
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) or decorated_off(scope):
            continue
        if scope.name in ("forward", "__call__") or any(method_calls(scope, t) for t in TRAINS):
            continue
        off = grad_off_lines(scope)
        calls = [
            c for c in ast.walk(scope) if isinstance(c, ast.Call) and c.lineno not in off
            and (dotted(c.func) in ("self", "self.forward") or dotted(c.func).split(".")[-1].lower() in ("model", "net", "policy", "actor", "q", "qnet", "current_model"))
        ]
        returns = [n for n in ast.walk(scope) if isinstance(n, ast.Return)]
        if calls and returns and all(cut(r.value, scope) for r in returns) and not any(decorated_off(f) for f in chain):
            yield path, calls[0].lineno, "AGF001", f"{scope.name}() runs {dotted(calls[0].func)}(...) and returns only cut values"


def parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def notebook(path: Path) -> Program:
    """Code cells joined in order, IPython lines blanked, cells that do not parse on their
    own left out (as blank lines, so the others keep their coordinates)."""
    cells = json.loads(path.read_text(encoding="utf-8", errors="replace")).get("cells", [])
    lines: list[str] = []
    origin: list[tuple[int | None, int]] = []
    for number, cell in enumerate(cells, start=1):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else source
        masked = ["" if line.lstrip().startswith(("!", "%", "?")) else line for line in text.splitlines()]
        if not parses("\n".join(masked) + "\n"):
            masked = [""] * len(masked)
        lines += masked
        origin += [(number, k) for k in range(1, len(masked) + 1)]
    return Program("\n".join(lines) + "\n", origin)


def program(path: Path) -> Program:
    if path.suffix == ".ipynb":
        return notebook(path)
    text = path.read_text(encoding="utf-8", errors="replace")
    return Program(text, [(None, k) for k in range(1, text.count("\n") + 2)])


def where(path: Path, root: Path, prog: Program, line: int) -> str:
    cell, at = prog.origin[line - 1] if 0 < line <= len(prog.origin) else (None, line)
    name = path.relative_to(root).as_posix()
    return f"{name}:cell {cell}:{at}" if cell is not None else f"{name}:{at}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("/tmp/agf-recall"))
    parser.add_argument("--repo", default="", help="only this owner/name")
    parser.add_argument("--context", type=int, default=0)
    args = parser.parse_args(argv)
    total = 0
    for repo in load_repos():
        if args.repo and repo.name != args.repo:
            continue
        root = args.work / repo.slug
        found = []
        for path in python_files(root):
            if ".ipynb_checkpoints" in path.parts:  # the tool skips Jupyter's autosaves too
                continue
            prog = program(path)
            try:
                tree = ast.parse(prog.text)
            except (SyntaxError, ValueError):
                sys.stdout.write(f"# {path.relative_to(root)}: does not parse, not searched\n")
                continue
            lines = prog.text.splitlines()
            for find in (*SEARCHES, agf001_cut_return):
                for _, line, code, what in sorted(set(find(path, tree)), key=lambda c: (c[1], c[2])):
                    found.append((where(path, root, prog, line), code, what, lines, line))
        sys.stdout.write(f"## {repo.name} ({len(found)} candidates)\n")
        for place, code, what, lines, line in found:
            sys.stdout.write(f"{place}: {code} {what}\n")
            for k in range(max(1, line - args.context), min(len(lines), line + args.context) + 1):
                sys.stdout.write(f"    {'>' if k == line else ' '} {lines[k - 1]}\n")
        total += len(found)
    sys.stdout.write(f"{total} candidates\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
