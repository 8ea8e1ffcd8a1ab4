"""Loads the verification corpus: one `Case` per ``NN_name/`` folder, checked for shape.

Shared by ``run.py`` (the benchmark) and ``tests/test_verification_corpus.py`` (the CI
check that the corpus is well-formed), so both read the folders the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from autograd_fix.compat import tomllib

CORPUS_DIR = Path(__file__).resolve().parent

#: How a wrong rewrite goes wrong; the issue asks for at least one of each.
WRONG_KINDS = {
    "drop-term": "a term of the computation silently dropped",
    "zero-misplaced": "gradients zeroed at the wrong point (after backward, or between backward and step)",
    "no-grad-kills-gradient": "a no_grad / detach that cuts a gradient the code needs",
    "none-for-needed-input": "backward returns None for an input that needs its gradient",
    "changed-scale": "a value or gradient scaled differently than the original intended",
    "item-for-tensor": ".item() (a Python float) where later code needs a tensor",
    "still-broken": "the rewrite leaves the original defect in place",
    "swapped-values": "saved tensors unpacked in a different order than they were saved",
    "out-of-place-update": "a parameter update rewritten out of place, so the parameter never changes",
    "crashes": "the rewrite raises where the original ran",
    "changed-precision": "the computation moved to a lower precision than the original ran in",
}

#: The six kinds issue 7 names; the corpus must hold at least one rewrite of each.
REQUIRED_WRONG_KINDS = (
    "drop-term",
    "zero-misplaced",
    "no-grad-kills-gradient",
    "none-for-needed-input",
    "changed-scale",
    "item-for-tensor",
)

CASE_KINDS = ("script", "library")
_FOLDER = re.compile(r"^(\d\d)_[a-z0-9_]+$")
_LINK = re.compile(r"^https://(github\.com/[^/]+/[^/]+/(issues|pull)/\d+|discuss\.pytorch\.org/t/\S+|stackoverflow\.com/questions/\d+\S*|datascience\.stackexchange\.com/questions/\d+\S*)$")


class CorpusError(ValueError):
    """A case folder is malformed (missing file or key, unknown kind, bad link)."""


@dataclass(frozen=True)
class Case:
    """One bug report turned into a buggy file, its hand fix and wrong rewrites."""

    name: str
    folder: Path
    link: str
    rule: str
    kind: str
    description: str
    buggy_source: str
    fixed_source: str
    wrong: dict[str, tuple[str, str]]  # file name -> (wrong kind, source)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CorpusError(f"{path.parent.name}: cannot read {path.name}: {exc}") from exc


def load_case(folder: Path) -> Case:
    """Read and check one case folder; raises `CorpusError` naming what is wrong."""
    name = folder.name
    try:
        meta = tomllib.loads(_read(folder / "case.toml"))
    except tomllib.TOMLDecodeError as exc:
        raise CorpusError(f"{name}: case.toml: {exc}") from exc
    for key in ("link", "rule", "kind", "description", "wrong"):
        if key not in meta:
            raise CorpusError(f"{name}: case.toml lacks `{key}`")
    if not _LINK.match(meta["link"]):
        raise CorpusError(f"{name}: link {meta['link']!r} is not a GitHub issue/PR, forum thread or Q&A question")
    if meta["kind"] not in CASE_KINDS:
        raise CorpusError(f"{name}: kind {meta['kind']!r} is not one of {', '.join(CASE_KINDS)}")
    if not re.fullmatch(r"AGF\d{3}", str(meta["rule"])):
        raise CorpusError(f"{name}: rule {meta['rule']!r} is not a rule code")
    listed = dict(meta["wrong"])
    present = {p.name for p in folder.glob("wrong_*.py")}
    if not present:
        raise CorpusError(f"{name}: no wrong_*.py rewrite")
    if set(listed) != present:
        raise CorpusError(
            f"{name}: [wrong] in case.toml lists {sorted(listed)} but the folder has {sorted(present)}"
        )
    for file_name, wrong_kind in listed.items():
        if wrong_kind not in WRONG_KINDS:
            raise CorpusError(f"{name}: {file_name}: unknown wrong kind {wrong_kind!r}")
    return Case(
        name=name,
        folder=folder,
        link=meta["link"],
        rule=meta["rule"],
        kind=meta["kind"],
        description=" ".join(str(meta["description"]).split()),
        buggy_source=_read(folder / "buggy.py"),
        fixed_source=_read(folder / "fixed.py"),
        wrong={f: (k, _read(folder / f)) for f, k in listed.items()},
    )


def case_folders(root: Path = CORPUS_DIR) -> list[Path]:
    """Every ``NN_name`` folder under `root`, in order."""
    return sorted(p for p in root.iterdir() if p.is_dir() and _FOLDER.match(p.name))


def load_cases(root: Path = CORPUS_DIR, *, only: list[str] | None = None) -> list[Case]:
    """All cases (or those whose folder name starts with one of `only`), checked."""
    folders = case_folders(root)
    if only:
        folders = [f for f in folders if any(f.name.startswith(prefix) for prefix in only)]
    return [load_case(folder) for folder in folders]
