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
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule, sorted by code."""
    from autograd_fix.codemods.rule import Rule

    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(rules_package.__path__):
        match = _FILE_PATTERN.match(info.name)
        if not match:
            continue
        classes = _defined_rules(f"{rules_package.__name__}.{info.name}", info.ispkg)
        if len(classes) != 1:
            raise RuleRegistryError(f"{info.name} must define exactly one Rule subclass, found {len(classes)}")
        rule = classes[0]
        expected = f"AGF{match.group(1)}"
        if not _CODE_PATTERN.match(getattr(rule, "code", "")) or rule.code != expected:
            raise RuleRegistryError(f"{info.name} defines {rule.__name__} with code {rule.code!r}, expected {expected}")
        expected_file = f"agf{match.group(1)}_{rule.name.replace('-', '_')}"
        if info.name != expected_file:
            raise RuleRegistryError(f"{info.name} should be named {expected_file} after its rule's name")
        if rule.triggers is not None or rule.trigger_pattern is not None:
            raise RuleRegistryError(f"{rule.code} declares its own triggers: its prefilter belongs in codemods/prefilters.py")
        if rule.code in found:
            raise RuleRegistryError(f"duplicate rule code {rule.code}: {found[rule.code].__name__} and {rule.__name__}")
        found[rule.code] = rule
    return tuple(found[code] for code in sorted(found))


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
    for rule in all_rules():
        if rule.code == code.upper():
            return rule
    return None


def select_rules(select: list[str] | None = None, ignore: list[str] | None = None) -> tuple[type[Rule], ...]:
    """Rules whose code starts with a selected prefix and with no ignored prefix."""
    chosen = set(selected_codes(select, ignore))
    return tuple(rule for rule in all_rules() if rule.code in chosen)


def selected_codes(select: Sequence[str] | None = None, ignore: Sequence[str] | None = None) -> tuple[str, ...]:
    """The codes `select_rules` answers, without importing a rule (the command line
    decides from these and `prefilters` whether a file needs libcst at all)."""
    return tuple(
        code for code in rule_codes()
        if (not select or any(code.startswith(prefix.upper()) for prefix in select))
        and not (ignore and any(code.startswith(prefix.upper()) for prefix in ignore))
    )


@functools.lru_cache(maxsize=1)
def rule_codes() -> tuple[str, ...]:
    """Every rule's code, from the module names alone (no rule is imported: checking a
    `--select` costs no libcst). `all_rules` fails loudly where a module's name and its
    rule's code disagree, so the two answers are the same."""
    return tuple(
        sorted(f"AGF{match.group(1)}" for info in pkgutil.iter_modules(rules_package.__path__)
               if (match := _FILE_PATTERN.match(info.name)))
    )


def unknown_codes(prefixes: list[str]) -> list[str]:
    """Prefixes that match no rule (a usage error: a typo should not silence a run)."""
    codes = rule_codes()
    return [p for p in prefixes if not any(code.startswith(p.upper()) for code in codes)]
