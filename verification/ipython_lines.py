"""A notebook's IPython lines in a verification run, run as Jupyter would run them.

The cells' program masks each IPython line (`cli.magics`): `%time out = model(xb)`
becomes `pass`, so a later `out` raised NameError and the patch stayed unverified. In
the run child, where the verification interpreter has IPython, each masked line is
given back to IPython's own input transformer (`TransformerManager.transform_cell`),
which makes it the Python line Jupyter runs (`get_ipython().run_line_magic('time',
'out = model(xb)')`, `x = get_ipython().getoutput('ls')`, a cell magic with its body as
one call), one line for one line, so every position stays where it was.

`get_ipython()` is then a sandbox shell (`SandboxShell`), not IPython's: a run must
not run shell commands, and must print the same on both sides.
  * `%time`, `%prun`, `%debug STMT` run their statement in the caller's namespace, as
    IPython does, without the timing report (it differs between runs);
  * `%timeit` runs its statement once, in a copy of the namespace (IPython runs it
    many times in a function: its assignments do not leak either);
  * `%env` reads and sets the run's environment; magics that only display or configure
    (`%matplotlib`, `%load_ext`, `obj?`, `%%html`) do nothing;
  * shell escapes (`!cmd`, `x = !cmd`, `%pip`, `%%bash`, `%%writefile`, ...) raise
    `ShellCommandRefused` and any other magic `MagicUnsupported`: the run stops there,
    on both sides alike, and the verdict names the cause (`environment.cause`), never
    a silent no-op whose missing result a later line would trip over.
Without IPython the lines stay masked, as before, and the verdict says so.

Stdlib only (IPython is optional): this module runs in the project's interpreter.
"""

from __future__ import annotations

import ast
import builtins
import os
import sys
from types import FrameType
from typing import Any, Mapping

#: magics that only display or configure the front end: nothing to run
QUIET_MAGICS = frozenset({
    "matplotlib", "config", "load_ext", "reload_ext", "unload_ext", "autoreload", "aimport", "precision", "pinfo",
    "pinfo2", "pdef", "pdoc", "psource", "pfile", "psearch", "who", "whos", "who_ls", "xmode", "pprint", "colors",
    "automagic", "autocall", "lsmagic", "magic", "quickref", "history", "hist", "tb", "page", "doctest_mode",
    "html", "markdown", "javascript", "js", "latex", "svg", "autosave", "notebook",
})
#: magics that run shell commands or write files: refused, never run
SHELL_MAGICS = frozenset({
    "pip", "conda", "mamba", "micromamba", "uv", "sx", "system", "sc", "bash", "sh", "script", "perl", "ruby",
    "python", "python2", "python3", "pypy", "cd", "pushd", "popd", "ls", "cat", "cp", "mv", "rm", "rmdir", "mkdir",
    "ll", "lf", "lk", "lx", "ldir", "writefile", "alias", "rehashx", "killbgscripts", "bookmark",
})
#: magics whose argument is a statement run in the caller's namespace
_STATEMENT_MAGICS = frozenset({"time", "prun", "debug", "capture"})
#: `%timeit` options that take a value
_TIMEIT_VALUE_OPTIONS = frozenset("nrp")


class ShellCommandRefused(RuntimeError):
    """A shell command reached in a verification run: refused, never run."""


class MagicUnsupported(RuntimeError):
    """An IPython magic that a verification run has no sandboxed equivalent for."""


def runnable_source(source: str, lines: Mapping[str, str]) -> tuple[str, str | None]:
    """`source` with each masked line of `lines` (placeholder -> its IPython input)
    replaced by what IPython's input transformer makes of that input, one line for one
    line; and the note for the verdict (None when `source` has no masked line)."""
    if not lines or source is None:
        return source, None
    split = source.splitlines(keepends=True)
    masked = sum(1 for line in split if line.rstrip("\r\n") in lines)
    if not masked:
        return source, None
    manager, version = _transformer()
    if manager is None:
        return source, (f"IPython is not installed in the verification interpreter: {_count(masked, 'IPython line')} "
                        "ran as `pass` (masked), not as in Jupyter")
    out: list[str] = []
    kept: list[str] = []
    for line in split:
        body = line.rstrip("\r\n")
        original = lines.get(body)
        if original is None:
            out.append(line)
            continue
        code = _transformed(manager, original)
        if code is None:
            kept.append(original.strip().splitlines()[0][:60])
            out.append(line)
            continue
        indent = body[: len(body) - len(body.lstrip(" \t"))]
        out.append(indent + code + line[len(body):])
    ran = masked - len(kept)
    note = (f"IPython {version} transformed {_count(ran, 'IPython line')}; get_ipython() is sandboxed: no shell "
            "command runs, %time prints no timing, %timeit runs once")
    if kept:
        note += f"; left masked (not one line of Python): {', '.join(kept)}"
    return "".join(out), note


def install_shell() -> SandboxShell:
    """Make `get_ipython()` answer with a sandbox shell in this run child (as IPython
    puts `get_ipython` where the cell's code finds it)."""
    shell = SandboxShell()
    builtins.get_ipython = lambda: shell  # type: ignore[attr-defined]
    return shell


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _transformer() -> tuple[Any, str | None]:
    try:
        import IPython
        from IPython.core.inputtransformer2 import TransformerManager
    except Exception:  # noqa: BLE001 - not installed, or broken: the lines stay masked
        return None, None
    return TransformerManager(), str(getattr(IPython, "__version__", "?"))


def _transformed(manager: Any, original: str) -> str | None:
    """IPython's Python for one masked input, when it is one line that parses."""
    head, _, rest = original.partition("\n")
    text = head.lstrip(" \t") + ("\n" + rest if rest else "")
    try:
        code = manager.transform_cell(text if text.endswith("\n") else text + "\n").rstrip("\n")
        ast.parse(code)
    except Exception:  # noqa: BLE001 - IPython could not make Python of it: it stays masked
        return None
    return code if "\n" not in code and "\r" not in code else None


class SandboxShell:
    """What `get_ipython()` returns in a verification run (see the module doc)."""

    def run_line_magic(self, magic_name: str, line: str, _stack_depth: int = 1) -> Any:
        return self._magic(magic_name, line, None, sys._getframe(_stack_depth))

    def run_cell_magic(self, magic_name: str, line: str, cell: str) -> Any:
        return self._magic(magic_name, line, cell, sys._getframe(1))

    def magic(self, arg_s: str) -> Any:
        """The older API: `get_ipython().magic('time f()')`."""
        name, _, line = arg_s.lstrip("%").partition(" ")
        return self._magic(name, line, None, sys._getframe(1))

    def system(self, cmd: str) -> None:
        raise ShellCommandRefused(f"!{cmd}")

    def getoutput(self, cmd: str, split: bool = True, depth: int = 0) -> None:
        raise ShellCommandRefused(f"!{cmd}")

    def _magic(self, name: str, line: str, cell: str | None, frame: FrameType) -> Any:
        sign = "%%" if cell is not None else "%"
        if name in SHELL_MAGICS:
            raise ShellCommandRefused(f"{sign}{name} {line}".strip())
        if name in QUIET_MAGICS:
            return None
        if name == "env" and cell is None:
            return _env(line)
        if name == "pwd":
            return os.getcwd()
        if name == "timeit":
            statement = cell if cell is not None else _timeit_statement(line)
            return _run(statement, frame, keep=False)
        if name in _STATEMENT_MAGICS:
            statement = cell if cell is not None else line
            return _run(statement, frame, keep=True) if statement.strip() else None
        raise MagicUnsupported(f"{sign}{name}")


def _run(statement: str, frame: FrameType, keep: bool) -> Any:
    """Run `statement` in the caller's namespace (`keep`: its assignments stay, as
    `%time`'s do), giving an expression's value back as IPython does."""
    local = frame.f_locals if keep else dict(frame.f_locals)
    try:
        expression = compile(statement, "<ipython magic>", "eval")
    except SyntaxError:
        exec(compile(statement, "<ipython magic>", "exec"), frame.f_globals, local)  # noqa: S102 - the user's code
        return None
    return eval(expression, frame.f_globals, local)  # noqa: S307 - the user's code


def _timeit_statement(line: str) -> str:
    """`%timeit`'s statement without its options (`-n 10 -r 3 -o f()` -> `f()`)."""
    rest = line.lstrip()
    while rest.startswith("-"):
        option, _, rest = rest.partition(" ")
        if option[1:2] in _TIMEIT_VALUE_OPTIONS and len(option) == 2:
            _, _, rest = rest.lstrip().partition(" ")
        rest = rest.lstrip()
    return rest


def _env(line: str) -> Any:
    """`%env`: all variables, one variable, or `NAME=value` / `NAME value` set."""
    text = line.strip()
    if not text:
        return dict(os.environ)
    if "=" in text or " " in text:
        name, value = (text.split("=", 1) if "=" in text else text.split(None, 1))
        os.environ[name.strip()] = value.strip()
        return None
    return os.environ.get(text)
