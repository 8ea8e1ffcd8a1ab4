"""What text each rule needs before it can fire: the prefilter, readable without libcst.

A file is parsed only for the rules whose prefilter admits its text (`engine.triggered`),
and the command line answers a file that no selected rule admits before it imports
libcst or any rule module (`cli/runner.py`): that is most of the start-up of a run on
a small file. So the declarations live here, in a module that imports nothing heavy,
keyed by rule code, and not in the rule modules; `Rule.may_fire_on` reads them, and
`registry.all_rules` refuses a registered rule that declares its own.

Each prefilter is a NECESSARY condition only: text it rejects must be text on which the
rule cannot report anything, whatever the rest of the file holds. Text it admits proves
nothing. Each entry says which part of its rule's code makes it necessary; a rule added
without an entry gets `DEFAULT` (any file with `torch` in it), which is always safe.
`tests/test_prefilters.py` checks the claim on the bug corpus, the rules' examples,
`examples/` and generated files (findings with and without the prefilter are equal).
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Iterable, Mapping, NamedTuple

from autograd_fix.codemods.torch_api import uses_torch


class AnyOf(NamedTuple):
    """One pattern written as its alternatives, searched one after the other: each a
    literal substring (a C scan of the text) or a regex. It answers what the one regex
    `part|part|...` answers, several times faster: Python's regex engine tries a pattern
    at every position of the text unless the pattern starts with a literal, and an
    alternation of words preceded by a boundary test does not."""

    parts: tuple[str | re.Pattern[str], ...]

    def search(self, text: str) -> str | re.Match[str] | None:
        """The first part found in `text` (None where none is): `re.Pattern.search`'s verdict."""
        for part in self.parts:
            if isinstance(part, str):
                if part in text:
                    return part
            else:
                match = part.search(text)
                if match is not None:
                    return match
        return None


class Prefilter(NamedTuple):
    """`tokens`: one must occur (a substring test); `pattern`: must also match, if set."""

    tokens: tuple[str, ...]
    pattern: re.Pattern[str] | AnyOf | None = None

    def admits(self, text: str) -> bool:
        """Could the rule fire on `text` at all? (A prefilter only, never evidence.)"""
        if not any(token in text for token in self.tokens):
            return False
        return self.pattern is None or self.pattern.search(text) is not None


#: a rule without an entry of its own: any file that names torch
DEFAULT = Prefilter(("torch",))

#: what Python allows between two tokens of one statement: blanks, line continuations,
#: and (inside brackets) line breaks and comments. A comment runs to the end of its line
#: (the lookahead): else a banner of `#####` could be split into comments in
#: exponentially many ways before a search fails.
_GAP = r"(?:[ \t\f\r\n\\]|#[^\r\n]*(?=[\r\n]|\Z))*"
#: a character that may belong to an identifier: an ASCII letter, digit or `_`, or any
#: non-ASCII character (a superset of what Python accepts, so the patterns below stay
#: necessary; written as one negated ASCII class, which compiles 20 times faster than
#: `[\w\x80-\U0010ffff]`)
_NAME_CHAR = r"[^\x00-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x7f]"

#: AGF003 reports only (`_mutation`, `_inplace_keywords`, `_sequential`):
#: - an augmented assignment (`x += y`, `p.data *= k`; `//=` and `**=` end in `/=`, `*=`);
#: - an assignment to a subscript (`x[i] = v`, also parenthesised: `(x[i]) = v`): `]` or
#:   `)`, then `=` that is not `==`;
#: - a call of a method whose name ends in `_` and does not start with one (`x.add_(y)`,
#:   `semantic/inplace.py`), the name and `(` maybe apart (`x.add_ (y)`, a line break
#:   inside brackets);
#: - `inplace=True` on an activation or dropout function, or an nn module's `inplace`
#:   given by keyword or as the positional `True` (`nn.ReLU(True)`).
#: Each contains `=` or `(`. The cheap, common texts are tried first (`inplace`, `True`:
#: most files that use torch.nn name one; an augmented assignment's operator), the
#: regexes last (`tests/test_prefilters.py` holds the one-regex spelling and compares).
_INPLACE = AnyOf((
    "inplace", "True",
    "+=", "-=", "*=", "/=", "%=", "@=", "&=", "|=", "^=", "<<=", ">>=",
    re.compile(rf"[\])]{_GAP}=(?!=)"),
    re.compile(rf"(?<!{_NAME_CHAR})(?!_){_NAME_CHAR}+(?<=_){_GAP}\("),
))


def _word(root: str, endings: str = "") -> re.Pattern[str]:
    """`root` (maybe followed by one of `endings`, `a|b`) as a word of an identifier: no
    letter before it, no lower-case letter after it (`val_loader`, `run_eval`, `testLoss`,
    not `value` or `interval`). The letter test before the root is a lookbehind written
    after it, so that the pattern starts with the root's literal text, which the regex
    engine scans for."""
    ending = f"(?:{endings})?" if endings else ""
    return re.compile(rf"{root}(?<![a-zA-Z]{'.' * len(root)}){ending}(?![a-z])")


PREFILTERS: Mapping[str, Prefilter] = MappingProxyType({
    # every kind of evidence (names, `.eval()`, `.train(False)`, loaders) contains one; a
    # graph that dies inside a function is cut by one of the calls (or the `.data` read)
    # after them; the pattern: as a word of an identifier (`val_loader`, `validate`,
    # `.eval()`), not in `value`
    "AGF001": Prefilter(
        ("eval", "val", "test", "predict", "infer", "holdout", "train(False)", ".item(", ".argmax(",
         ".argmin(", ".tolist(", ".numpy(", ".detach(", ".data", ".max(", ".min(", ".topk(", ".sort("),
        AnyOf((
            re.compile(r"\.(?:item|argmax|argmin|tolist|numpy|detach|max|min|topk|sort)\(|\.data\b|\.train\(False\)"),
            _word("val", "idation|idate|id"), _word("test", "ing"), _word("eval", "uation|uate"), _word("holdout"),
            _word("predict"), _word("infer", "ence"),
        )),
    ),
    "AGF002": Prefilter(("backward",)),
    "AGF003": Prefilter(("=", "("), _INPLACE),
    "AGF004": Prefilter(("Function",)),
    "AGF005": Prefilter(("Function",)),
    "AGF006": Prefilter(("backward",)),
    "AGF007": Prefilter(("save_for_backward",)),
    "AGF008": Prefilter(("backward", "training_step")),
    "AGF009": Prefilter((".data",)),
    "AGF010": Prefilter(("backward",)),
    "AGF011": Prefilter(("retain_graph",)),
    # `from torch.cuda import amp` names the old module without spelling `cuda.amp`
    "AGF012": Prefilter(("cuda.amp", "cpu.amp", "amp import", "cuda import", "cpu import", "Variable", "volatile")),
    # the misspellings of `requires_grad` the rule knows (its `TYPOS`)
    "AGF013": Prefilter(("require_grad", "require_grads", "required_grad", "required_grads", "requires_grads")),
    "AGF014": Prefilter(("checkpoint",)),
    "AGF015": Prefilter(("set_to_none",)),
    "AGF016": Prefilter(("log", "exp")),
    "AGF017": Prefilter(("anomaly", "empty_cache")),
    "AGF018": Prefilter(("backward",)),
    "AGF019": Prefilter(("backward",)),
    "AGF100": Prefilter(("noqa", "NOQA", "Noqa"), re.compile(r"#\s*noqa:\s*[^\n]*AGF\d", re.I)),
})


def prefilter(code: str) -> Prefilter:
    """The prefilter of the rule with `code` (`DEFAULT` where it declares none)."""
    return PREFILTERS.get(code, DEFAULT)


def triggered_codes(codes: Iterable[str], text: str) -> tuple[str, ...]:
    """The codes, among `codes`, of the rules that could fire on `text`: the file shows
    PyTorch use (`torch_api.uses_torch`) and the rule's prefilter admits it."""
    if not uses_torch(text):
        return ()
    return tuple(code for code in codes if prefilter(code).admits(text))
