"""The project's PyTorch floor, read from the `torch` requirement in its dependencies.

The floor is the lowest version a requirement admits: `torch>=2.1` -> 2.1,
`torch~=2.2` -> 2.2, `torch==2.0.*` -> 2.0, `torch>=1.13,<3` -> 1.13. Parsing is
`packaging`'s, the same that pip applies.

A `torch` requirement without a lower bound (`torch`, `torch<3`, `torch!=2.0.1`) says
nothing about the oldest release in use. Like Ruff, which takes its oldest supported
Python when `requires-python` gives no lower bound, it means `default_torch_floor()`: the
oldest PyTorch autograd-fix itself supports (and runs its verification on). No `torch`
requirement at all means no information, and rules assume the newest release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from autograd_fix.codemods.torch_version import TorchVersion

if TYPE_CHECKING:
    from packaging.specifiers import Specifier, SpecifierSet

# `packaging` and `verification.interpreter` load only once a dependency names torch:
# every run reads the nearest pyproject, and most of its entries are not torch (start-up)


def default_torch_floor() -> TorchVersion:
    """The floor assumed for a `torch` requirement that has no lower bound: the oldest
    torch autograd-fix verifies with (its `verify` extra's `torch>=2.1`); documented in
    the README's Configuration section."""
    from autograd_fix.verification.interpreter import OLDEST_TORCH

    return TorchVersion(*OLDEST_TORCH)

#: operators whose version is a lower bound of what they admit
_LOWER_BOUNDS = frozenset({">=", ">", "~=", "==", "==="})


def specifier_floor(specifiers: SpecifierSet) -> TorchVersion | None:
    """The lowest version `specifiers` admit, or None when nothing bounds them below."""
    bounds = [bound for spec in specifiers if (bound := _lower_bound(spec)) is not None]
    return max(bounds) if bounds else None


def _lower_bound(spec: Specifier) -> TorchVersion | None:
    from packaging.version import InvalidVersion, Version

    if spec.operator not in _LOWER_BOUNDS:
        return None
    text = spec.version.removesuffix(".*")
    try:
        release = Version(text).release
    except InvalidVersion:  # `===` takes arbitrary strings
        return None
    return TorchVersion(release[0], release[1] if len(release) > 1 else 0)


def dependencies_floor(dependencies: Iterable[object]) -> TorchVersion | None:
    """The torch floor of a `[project] dependencies` list (None: torch is not listed).

    With several `torch` entries (for different environment markers), the lowest
    floor wins: the code must run on each. Entries that are not valid requirements are
    skipped; pip reports those.
    """
    floors: list[TorchVersion] = []
    for entry in dependencies:
        # a name that canonicalizes to `torch` spells t-o-r-c-h in some case: any other
        # entry is skipped before `packaging` is loaded
        if not isinstance(entry, str) or "torch" not in entry.lower():
            continue
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.utils import canonicalize_name

        try:
            requirement = Requirement(entry)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) == "torch":
            floors.append(specifier_floor(requirement.specifier) or default_torch_floor())
    return min(floors) if floors else None
