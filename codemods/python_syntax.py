"""CPython's own verdict on a text's syntax, in a module without libcst.

A file that uses torch but that no rule's prefilter admits is not parsed with libcst
(`codemods/prefilters.py`); a syntax error in it is still an error of the run, as in any
other torch file, so the command line asks CPython's parser here before it would import
the engine, and the engine asks the same for such a text (`engine.check_source`).
"""

from __future__ import annotations

import ast
import warnings


def compile_quietly(text: str) -> None:
    """`compile(text)` without its warnings: an odd literal such as `0x1for` or `"\\d"` in
    the user's code is theirs to hear about when they run it, not a stray
    "<autograd-fix>:2: SyntaxWarning" line in the tool's output (twice in `--diff`), and
    under `-W error` such a warning would become a SyntaxError that rejects a good fix."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile(text, "<autograd-fix>", "exec", dont_inherit=True)


def syntax_problem(text: str) -> str | None:
    """`syntax error at LINE:COL: message` where CPython's parser rejects `text` (the
    position and words `python -m py_compile` gives, as the engine reports a file libcst
    cannot parse); None where it parses. Only the parser is asked (as libcst's grammar
    would be), not the compiler's later checks (`return` outside a function)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<autograd-fix>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        return f"syntax error at {error.lineno or 1}:{max(error.offset or 1, 1)}: {error.msg}"
    except (RecursionError, MemoryError):
        return "source nests too deeply to parse"
    except ValueError as error:  # NUL bytes
        return f"syntax error: {error}"
    return None
