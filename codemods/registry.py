"""Finds the rules: every package `codemods/rules/agfNNN_<name>/` defines exactly one.

A rule's package holds the rule (in its `__init__.py`, or in `rule.py`), the analyses only
it uses, and its examples (`examples.py`). No hand-kept list: adding a package adds a
rule. Two rules claiming one code, a package whose number disagrees with its rule's code,
or one without a rule fail loudly at import. (A plain module `agfNNN_<name>.py` is still
read, so a rule written before packages keeps loading until it is moved into one.)
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
import re
from types import ModuleType
from typing import TYPE_CHECKING, Sequence
import types

from autograd_fix.codemods import rules as rules_package

if TYPE_CHECKING:
    from autograd_fix.codemods.rule import Rule

_FILE_PATTERN = re.compile(r"^agf(\d{3})_[a-z0-9_]+$")
_CODE_PATTERN = re.compile(r"^AGF\d{3}$")


class RuleRegistryError(RuntimeError):
    """The rules folder is inconsistent (duplicate code, missing rule, bad name)."""


@functools.lru_cache(maxsize=1)
def _rule_modules() -> dict[str, tuple[str, bool]]:
    """code -> (the module that defines its rule, whether it is a package), from the
    folder's names alone (nothing is imported)."""
    found: dict[str, tuple[str, bool]] = {}
    for info in pkgutil.iter_modules(rules_package.__path__):
        match = _FILE_PATTERN.match(info.name)
        if not match:
            continue
        code = f"AGF{match.group(1)}"
        if code in found:
            raise RuleRegistryError(f"duplicate rule code {code}: {found[code][0]} and {info.name}")
        found[code] = (info.name, info.ispkg)
    return found


@functools.lru_cache(maxsize=None)
def load_rule(code: str) -> type[Rule]:
    """The rule with `code` (a code of `rule_codes`), importing its module and no other."""
    module_name, is_package = _rule_modules()[code]
    classes = _defined_rules(f"{rules_package.__name__}.{module_name}", is_package)
    if len(classes) != 1:
        raise RuleRegistryError(f"{module_name} must define exactly one Rule subclass, found {len(classes)}")
    rule = classes[0]
    if not _CODE_PATTERN.match(getattr(rule, "code", "")) or rule.code != code:
        raise RuleRegistryError(f"{module_name} defines {rule.__name__} with code {getattr(rule, 'code', None)!r}, expected {code}")
    expected_file = f"agf{code[3:]}_{rule.name.replace('-', '_')}"
    if module_name != expected_file:
        raise RuleRegistryError(f"{module_name} should be named {expected_file} after its rule's name")
    if rule.triggers is not None or rule.trigger_pattern is not None:
        raise RuleRegistryError(f"{code} declares its own triggers: its prefilter belongs in codemods/prefilters.py")
    return rule


def all_rules() -> tuple[type[Rule], ...]:
    """Every rule, sorted by code."""
    return tuple(load_rule(code) for code in rule_codes())


def _defined_rules(name: str, is_package: bool) -> list[type[Rule]]:
    """The Rule subclasses a rule's module defines; for a package, its `__init__.py`'s,
    else its `rule.py`'s."""
    module = importlib.import_module(name)
    found = _own_rules(module)
    if not found and is_package and importlib.util.find_spec(f"{name}.rule") is not None:
        found = _own_rules(importlib.import_module(f"{name}.rule"))
    return found


def _own_rules(module: ModuleType) -> list[type[Rule]]:
    from autograd_fix.codemods.rule import Rule

    return [
        value
        for value in vars(module).values()
        # on 3.10 an alias such as `Region = tuple[...]` is an instance of `type`, and
        # issubclass() on it raises against an ABC like Rule
        if isinstance(value, type) and not isinstance(value, types.GenericAlias)
        and issubclass(value, Rule) and value.__module__ == module.__name__
    ]


def rule_by_code(code: str) -> type[Rule] | None:
    return load_rule(code.upper()) if code.upper() in _rule_modules() else None


def select_rules(select: list[str] | None = None, ignore: list[str] | None = None) -> tuple[type[Rule], ...]:
    """Rules whose code starts with a selected prefix and with no ignored prefix."""
    return tuple(load_rule(code) for code in selected_codes(select, ignore))


class SelectedRules(Sequence["type[Rule]"]):
    """The rules of `codes`, each imported only once it is needed.

    As a sequence it is the rules themselves (iterating imports them all); the engine asks
    `triggered` first (`engine.triggered`): only the rules whose prefilter admits a text
    are imported, so a check of a small file loads the few rule modules that can fire on
    it, and the codes of the others are known without them (AGF100 judges `# noqa` codes
    against every selected code)."""

    def __init__(self, codes: Sequence[str]) -> None:
        self.codes = tuple(codes)

    def triggered(self, text: str) -> tuple[type[Rule], ...]:
        """The rules that could fire on `text` (`prefilters.triggered_codes`), imported."""
        from autograd_fix.codemods.prefilters import triggered_codes

        return self.load(triggered_codes(self.codes, text))

    def load(self, codes: Sequence[str]) -> tuple[type[Rule], ...]:
        """The rules of `codes` (a subsequence of `self.codes`, e.g. `triggered_codes`'
        answer), imported."""
        return tuple(load_rule(code) for code in codes)

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, index):  # type: ignore[no-untyped-def, override]
        if isinstance(index, slice):
            return tuple(load_rule(code) for code in self.codes[index])
        return load_rule(self.codes[index])

    def __repr__(self) -> str:
        return f"SelectedRules({self.codes!r})"


def lazy_rules(select: Sequence[str] | None = None, ignore: Sequence[str] | None = None) -> SelectedRules:
    """`select_rules`' answer, the rules imported only as a text needs them."""
    return SelectedRules(selected_codes(select, ignore))


def codes_of(rules: Sequence[type[Rule]]) -> list[str]:
    """The rules' codes (without importing the rules of a `SelectedRules`)."""
    return list(rules.codes) if isinstance(rules, SelectedRules) else [rule.code for rule in rules]


def selected_codes(select: Sequence[str] | None = None, ignore: Sequence[str] | None = None) -> tuple[str, ...]:
    """The codes `select_rules` answers, without importing a rule (the command line
    decides from these and `prefilters` whether a file needs libcst at all)."""
    return tuple(
        code for code in rule_codes()
        if (not select or any(code.startswith(prefix.upper()) for prefix in select))
        and not (ignore and any(code.startswith(prefix.upper()) for prefix in ignore))
    )


def rule_codes() -> tuple[str, ...]:
    """Every rule's code, from the module names alone (no rule is imported: checking a
    `--select` costs no libcst). `load_rule` fails loudly where a module's name and its
    rule's code disagree, so the two answers are the same."""
    return tuple(sorted(_rule_modules()))


def unknown_codes(prefixes: list[str]) -> list[str]:
    """Prefixes that match no rule (a usage error: a typo should not silence a run)."""
    codes = rule_codes()
    return [p for p in prefixes if not any(code.startswith(p.upper()) for code in codes)]
