"""Recall search: find, by hand-written AST patterns, the code the rules are meant to catch.

This is deliberately independent of autograd-fix's own analyses (plain `ast`, no import of
the tool), so that what the tool misses can be measured against it. It over-approximates:
every candidate is a place a human must read and judge (real instance of the bug or not),
and for each real one check whether the tool reports it. Verdicts live in
`benchmarks/AUDIT.md` under "Recall".

Patterns (one tag per rule the pattern belongs to):
- AGF001 a function (or module level) that calls `X.eval()` and later calls `X(...)` /
  `X.generate|sample|predict(...)`, or an eval-named function that runs a loop, with no
  `no_grad`/`inference_mode`/`set_grad_enabled` around it and no backward/step in it;
- AGF002 a loop with `.backward()` and `.step()` but no `zero_grad` / `.grad = None` /
  `.grad.zero_()` in the loop;
- AGF003 a leaf update `p -= ... p.grad` or in-place method on a parameter outside
  `no_grad`, and in-place ops on the output of an op that saves its output (sigmoid,
  tanh, exp, softmax, ...) later in the same function;
- AGF004/005/007 `autograd.Function` subclasses: backward return count vs forward inputs,
  `ctx.attr = <tensor-looking value>` in forward, `save_for_backward` of a non-tensor;
- AGF006 in a loop with backward: `acc += v`, `acc = acc + v`, `acc.append(v)` where `v`
  was backward-ed or is a loss-named name, not cut by `.item()`/`.detach()`/`float()`;
- AGF008 `torch.tensor(<...>.item())`, `torch.tensor(x, requires_grad=True)`,
  `.detach().requires_grad_()`, `.numpy()` in a function that calls backward;
- AGF009 `.data` (not `torch.utils.data`, `args.data`) outside `no_grad` in a scope that runs
  backward/step, or in a `forward`/`*_step` method;
- AGF010 `out, h = f(x, h)` in a loop with backward and no detach of `h`;
- AGF011 `retain_graph=True`;
- AGF012 `Variable(`, `torch.cuda.amp.*`/`torch.cpu.amp.*`, `volatile=`.

Notebooks are searched too (code cells joined; a line number counts in that program).

    python benchmarks/recall_search.py ROOT... [--only AGF001,AGF002]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterator
from pathlib import Path

Candidate = tuple[Path, int, str, str]

GRAD_OFF = frozenset({"no_grad", "inference_mode", "set_grad_enabled"})
EVAL_WORDS = frozenset({
    "eval", "evaluate", "evaluation", "valid", "validate", "validation", "val", "test", "predict", "prediction",
    "infer", "inference", "sample", "generate", "decode", "greedy",
})
MODEL_WORDS = frozenset({"model", "net", "module", "encoder", "decoder", "generator", "transformer", "forward", "rnn", "lstm"})
SAVES_OUTPUT = frozenset({"sigmoid", "tanh", "exp", "softmax", "log_softmax", "sqrt", "rsqrt", "pow", "elu", "silu"})
SKIP_DIRS = frozenset({".git", "build", "dist", "__pycache__", ".venv", "venv", "site-packages"})


def dotted(node: ast.AST) -> str:
    """`a.b.c` for a Name/Attribute chain, '' otherwise (calls in the chain break it)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def method_calls(tree: ast.AST, name: str) -> list[ast.Call]:
    """Calls `<anything>.name(...)` in `tree`, nested functions left out."""
    return [
        n for n in walk_local(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == name
    ]


def walk_local(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk that does not enter nested functions, lambdas or classes."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        child = stack.pop()
        yield child
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(child))


def is_grad_off(expr: ast.AST) -> bool:
    target = expr.func if isinstance(expr, ast.Call) else expr
    name = dotted(target).rsplit(".", 1)[-1]
    if name == "set_grad_enabled" and isinstance(expr, ast.Call) and expr.args:
        return isinstance(expr.args[0], ast.Constant) and expr.args[0].value is False
    return name in GRAD_OFF


def grad_off_lines(scope: ast.AST) -> set[int]:
    """Lines covered by `with no_grad()` / `inference_mode()` blocks in `scope`."""
    covered: set[int] = set()
    for node in ast.walk(scope):
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(is_grad_off(i.context_expr) for i in node.items):
            covered.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return covered


def decorated_off(function: ast.AST) -> bool:
    return any(is_grad_off(d) for d in getattr(function, "decorator_list", []))


def scopes(tree: ast.Module) -> Iterator[tuple[ast.AST, list[ast.AST]]]:
    """Every function (and the module), with its chain of enclosing functions/classes."""
    def visit(node: ast.AST, chain: list[ast.AST]) -> Iterator[tuple[ast.AST, list[ast.AST]]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield child, chain
                yield from visit(child, [*chain, child])
            elif isinstance(child, ast.ClassDef):
                yield from visit(child, [*chain, child])
            else:
                yield from visit(child, chain)
    yield tree, []
    yield from visit(tree, [])


def loops(scope: ast.AST) -> list[ast.AST]:
    """Loops of one scope (nested loops included, nested functions not)."""
    return [n for n in walk_local(scope) if isinstance(n, (ast.For, ast.While, ast.AsyncFor))]


def eval_named(name: str) -> bool:
    """An evaluation-sounding function name (pytest's `test_*` functions are tests, not
    evaluation passes)."""
    return not name.startswith("test_") and any(word in EVAL_WORDS for word in name.split("_"))


def runs_model(node: ast.AST) -> bool:
    """Does `node` call something that looks like a model (`self(...)`, `model.x(...)`)?"""
    for call in walk_local(node):
        if isinstance(call, ast.Call):
            parts = set(dotted(call.func).lower().split("."))
            if parts & MODEL_WORDS or dotted(call.func) == "self":
                return True
    return False


def agf001(path: Path, tree: ast.Module) -> Iterator[Candidate]:
    for scope, chain in scopes(tree):
        if decorated_off(scope) or any(decorated_off(f) for f in chain):
            continue
        if method_calls(scope, "backward") or method_calls(scope, "step"):
            continue
        covered = grad_off_lines(scope)
        evaled = {dotted(c.func.value): c.lineno for c in method_calls(scope, "eval") if not c.args}
        evaled.pop("", None)
        name = getattr(scope, "name", "<module>").lower()
        if eval_named(name) and any(loop.lineno not in covered and runs_model(loop) for loop in loops(scope)):
            yield path, scope.lineno, "AGF001", f"eval-named {name}() runs a model in a loop with grad on"
        for node in walk_local(scope):
            if not isinstance(node, ast.Call) or node.lineno in covered:
                continue
            callee = dotted(node.func)
            head, _, last = callee.rpartition(".")
            if callee in evaled and node.lineno > evaled[callee]:
                yield path, node.lineno, "AGF001", f"forward of {callee} after {callee}.eval()"
            elif head in evaled and last in ("generate", "sample", "predict", "forward") and node.lineno > evaled[head]:
                yield path, node.lineno, "AGF001", f"{callee}() after {head}.eval()"


def agf002(path: Path, tree: ast.Module) -> Iterator[Candidate]:
    for scope, _ in scopes(tree):
        for loop in loops(scope):
            if not (method_calls(loop, "backward") and method_calls(loop, "step")):
                continue
            text = ast.unparse(loop)
            if "zero_grad" in text or ".grad = None" in text or "grad.zero_" in text or "closure" in text:
                continue
            yield path, loop.lineno, "AGF002", "loop with backward and step, no zero_grad in it"


def backward_names(scope: ast.AST) -> set[str]:
    return {dotted(c.func.value) for c in method_calls(scope, "backward")} - {""}


def is_cut(value: ast.AST) -> bool:
    text = ast.unparse(value)
    return any(cut in text for cut in (".item()", ".detach()", "float(", ".tolist()", ".cpu().numpy()", "int("))


def agf006(path: Path, tree: ast.Module) -> Iterator[Candidate]:
    for scope, _ in scopes(tree):
        covered = grad_off_lines(scope)
        for loop in loops(scope):
            if not method_calls(loop, "backward"):
                continue
            carriers = backward_names(loop)

            def graphy(value: ast.AST) -> bool:
                """A loss-like or backward-ed name in the value, not cut off the graph."""
                names = {dotted(n) for n in ast.walk(value) if isinstance(n, (ast.Name, ast.Attribute))}
                lossy = any(n in carriers or "loss" in n.split(".")[-1].lower() for n in names if n)
                return lossy and not is_cut(value)
            for node in walk_local(loop):
                if getattr(node, "lineno", 0) in covered:
                    continue
                if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and graphy(node.value):
                    yield path, node.lineno, "AGF006", f"{ast.unparse(node.target)} += {ast.unparse(node.value)}"
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append":
                    if node.args and graphy(node.args[0]):
                        yield path, node.lineno, "AGF006", f"append({ast.unparse(node.args[0])})"


def agf011(path: Path, tree: ast.Module) -> Iterator[Candidate]:
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "retain_graph":
            if isinstance(node.value, ast.Constant) and node.value.value is True:
                yield path, node.value.lineno, "AGF011", "retain_graph=True"


def agf012(path: Path, tree: ast.Module) -> Iterator[Candidate]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and dotted(node.func).split(".")[-1] == "Variable":
            yield path, node.lineno, "AGF012", "Variable(...)"
        elif isinstance(node, ast.Attribute) and dotted(node).startswith(("torch.cuda.amp.", "torch.cpu.amp.")):
            yield path, node.lineno, "AGF012", dotted(node)
        elif isinstance(node, ast.ImportFrom) and node.module in ("torch.cuda.amp", "torch.cpu.amp"):
            yield path, node.lineno, "AGF012", f"from {node.module} import ..."
        elif isinstance(node, ast.keyword) and node.arg == "volatile":
            yield path, node.value.lineno, "AGF012", "volatile="


def agf009(path: Path, tree: ast.Module) -> Iterator[Candidate]:
    for scope, _ in scopes(tree):
        name = getattr(scope, "name", "<module>")
        trains = bool(method_calls(scope, "backward") or method_calls(scope, "step"))
        forwardish = name == "forward" or name.endswith("_step")
        covered = grad_off_lines(scope)
        if not (trains or forwardish):
            continue
        for node in walk_local(scope):
            if isinstance(node, ast.Attribute) and node.attr == "data" and not dotted(node).startswith("torch.") \
                    and dotted(node.value).split(".")[-1] not in ("args", "opt", "cfg", "config", "hparams") \
                    and node.lineno not in covered:
                yield path, node.lineno, "AGF009", f".data in {name}() ({'trains' if trains else 'forward'})"


def function_classes(tree: ast.Module) -> Iterator[ast.ClassDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(dotted(b).split(".")[-1] == "Function" for b in node.bases):
            yield node


def methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}


def agf_function(path: Path, tree: ast.Module) -> Iterator[Candidate]:
    """AGF004, AGF005, AGF007 on custom autograd.Function classes."""
    for cls in function_classes(tree):
        found = methods(cls)
        forward, backward = found.get("forward"), found.get("backward")
        if not (forward and backward):
            continue
        params = [a.arg for a in forward.args.args] + [a.arg for a in forward.args.kwonlyargs]
        inputs = params if "setup_context" in found else params[1:]
        if forward.args.vararg is None:
            for ret in walk_local(backward):
                if isinstance(ret, ast.Return) and ret.value is not None:
                    count = len(ret.value.elts) if isinstance(ret.value, ast.Tuple) else 1
                    if isinstance(ret.value, (ast.Tuple, ast.Name, ast.Call, ast.BinOp)) and count != len(inputs):
                        yield path, ret.lineno, "AGF004", f"{cls.name}.backward returns {count}, forward takes {len(inputs)}"
        for holder in filter(None, (forward, found.get("setup_context"))):
            for node in walk_local(holder):
                if isinstance(node, ast.Assign) and any(dotted(t).startswith("ctx.") for t in node.targets):
                    if not isinstance(node.value, ast.Constant) and not is_shape_like(node.value):
                        yield path, node.lineno, "AGF005", f"{cls.name}: {ast.unparse(node)[:60]}"
                if isinstance(node, ast.Call) and dotted(node.func).endswith("save_for_backward"):
                    for arg in node.args:
                        if isinstance(arg, (ast.Constant, ast.Tuple)) or is_shape_like(arg):
                            yield path, node.lineno, "AGF007", f"{cls.name}: save_for_backward({ast.unparse(arg)})"


def is_shape_like(value: ast.AST) -> bool:
    text = ast.unparse(value)
    return text.endswith((".item()", ".shape", ".size()", ".dtype", ".device")) or text.startswith(("len(", "int(", "float("))


def agf003(path: Path, tree: ast.Module) -> Iterator[Candidate]:
    for scope, chain in scopes(tree):
        if decorated_off(scope) or any(decorated_off(f) for f in chain):
            continue
        covered = grad_off_lines(scope)
        saved_outputs: dict[str, int] = {}
        for node in sorted(walk_local(scope), key=lambda n: getattr(n, "lineno", 0)):
            line = getattr(node, "lineno", 0)
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                op = dotted(node.value.func).split(".")[-1] if isinstance(node.value, ast.Call) else ""
                if op in SAVES_OUTPUT:
                    saved_outputs[node.targets[0].id] = line
                else:
                    saved_outputs.pop(node.targets[0].id, None)
            if line in covered:
                continue
            if isinstance(node, ast.AugAssign) and ".grad" in ast.unparse(node.value) and isinstance(node.op, ast.Sub):
                yield path, line, "AGF003", f"leaf update outside no_grad: {ast.unparse(node)[:60]}"
            target = None
            if isinstance(node, ast.AugAssign):
                target = dotted(node.target)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_") \
                    and not node.func.attr.startswith("_") and node.func.attr not in ("requires_grad_", "detach_", "share_memory_"):
                target = dotted(node.func.value)
            if target and target in saved_outputs and line > saved_outputs[target]:
                yield path, line, "AGF003", f"in-place on {target}, output of an op that saves it"


def agf008(path: Path, tree: ast.Module) -> Iterator[Candidate]:
    for scope, _ in scopes(tree):
        trains = bool(method_calls(scope, "backward"))
        for node in walk_local(scope):
            if not isinstance(node, ast.Call):
                continue
            callee = dotted(node.func)
            text = ast.unparse(node)
            if callee in ("torch.tensor", "torch.Tensor", "torch.FloatTensor") and node.args:
                inner = ast.unparse(node.args[0])
                grad = any(k.arg == "requires_grad" for k in node.keywords)
                if ".item()" in inner or (grad and trains):
                    yield path, node.lineno, "AGF008", text[:70]
            elif isinstance(node.func, ast.Attribute) and node.func.attr == "requires_grad_" and ".detach()" in text and trains:
                yield path, node.lineno, "AGF008", text[:70]
            elif trains and isinstance(node.func, ast.Attribute) and node.func.attr == "from_numpy":
                yield path, node.lineno, "AGF008", text[:70]


def agf010(path: Path, tree: ast.Module) -> Iterator[Candidate]:
    for scope, _ in scopes(tree):
        for loop in loops(scope):
            if not method_calls(loop, "backward"):
                continue
            loop_text = ast.unparse(loop)
            for node in walk_local(loop):
                if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                    continue
                targets = {ast.unparse(e) for t in node.targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])}
                args = {ast.unparse(a) for a in node.value.args}
                for state in targets & args:
                    if not any(cut in loop_text for cut in (f"{state}.detach", f"{state}[0].detach", "repackage", "detach(")):
                        yield path, node.lineno, "AGF010", f"{state} fed back into {dotted(node.value.func)}() without detach"


SEARCHES = (agf001, agf002, agf003, agf_function, agf006, agf008, agf009, agf010, agf011, agf012)


def python_files(root: Path) -> Iterator[Path]:
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.ipynb")]):
        if not SKIP_DIRS.intersection(path.relative_to(root).parts):
            yield path


def notebook_program(path: Path) -> str:
    """A notebook's code cells as one program (IPython `!`/`%` lines blanked, so that
    line numbers still count within the joined program)."""
    cells = json.loads(path.read_text(encoding="utf-8", errors="replace")).get("cells", [])
    lines: list[str] = []
    for cell in cells:
        if cell.get("cell_type") == "code":
            source = cell.get("source", "")
            text = "".join(source) if isinstance(source, list) else source
            lines += ["" if line.lstrip().startswith(("!", "%")) else line for line in text.splitlines()]
    return "\n".join(lines) + "\n"


def search(roots: list[Path]) -> Iterator[Candidate]:
    for root in roots:
        for path in python_files(root):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
                tree = ast.parse(notebook_program(path) if path.suffix == ".ipynb" else text)
            except (SyntaxError, ValueError):
                continue
            for find in SEARCHES:
                yield from sorted(set(find(path, tree)), key=lambda c: (c[1], c[2]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="+", type=Path)
    parser.add_argument("--only", default="", help="comma-separated rule codes to keep")
    args = parser.parse_args(argv)
    wanted = set(filter(None, args.only.split(",")))
    count = 0
    for path, line, code, what in search(args.roots):
        if wanted and code not in wanted:
            continue
        sys.stdout.write(f"{path}:{line}: {code} {what}\n")
        count += 1
    sys.stdout.write(f"{count} candidates\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
