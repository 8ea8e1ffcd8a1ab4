"""Finds the rules: every `codemods/rules/agfNNN_*.py` module defines exactly one.

No hand-kept list: adding a file adds a rule. Two rules claiming one code, a file whose
number disagrees with its rule's code, or a file without a rule fail loudly at import.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
import types

from autograd_fix.codemods import rules as rules_package
from autograd_fix.codemods.rule import Rule

_FILE_PATTERN = re.compile(r"^agf(\d{3})_[a-z0-9_]+$")
_CODE_PATTERN = re.compile(r"^AGF\d{3}$")


class RuleRegistryError(RuntimeError):
    """The rules folder is inconsistent (duplicate code, missing rule, bad name)."""


@functools.lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule, sorted by code."""
    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(rules_package.__path__):
        match = _FILE_PATTERN.match(info.name)
        if not match:
            continue
        module = importlib.import_module(f"{rules_package.__name__}.{info.name}")
        # on 3.10 an alias such as `Region = tuple[...]` is an instance of `type`, and
        # issubclass() on it raises against an ABC like Rule
        classes = [
            value
            for value in vars(module).values()
            if isinstance(value, type) and not isinstance(value, types.GenericAlias)
            and issubclass(value, Rule) and value.__module__ == module.__name__
        ]
        if len(classes) != 1:
            raise RuleRegistryError(f"{info.name}.py must define exactly one Rule subclass, found {len(classes)}")
        rule = classes[0]
        expected = f"AGF{match.group(1)}"
        if not _CODE_PATTERN.match(getattr(rule, "code", "")) or rule.code != expected:
            raise RuleRegistryError(f"{info.name}.py defines {rule.__name__} with code {rule.code!r}, expected {expected}")
        expected_file = f"agf{match.group(1)}_{rule.name.replace('-', '_')}"
        if info.name != expected_file:
            raise RuleRegistryError(f"{info.name}.py should be named {expected_file}.py after its rule's name")
        if rule.code in found:
            raise RuleRegistryError(f"duplicate rule code {rule.code}: {found[rule.code].__name__} and {rule.__name__}")
        found[rule.code] = rule
    return tuple(found[code] for code in sorted(found))


def rule_by_code(code: str) -> type[Rule] | None:
    for rule in all_rules():
        if rule.code == code.upper():
            return rule
    return None


def select_rules(select: list[str] | None = None, ignore: list[str] | None = None) -> tuple[type[Rule], ...]:
    """Rules whose code starts with a selected prefix and with no ignored prefix."""
    chosen = []
    for rule in all_rules():
        if select and not any(rule.code.startswith(prefix.upper()) for prefix in select):
            continue
        if ignore and any(rule.code.startswith(prefix.upper()) for prefix in ignore):
            continue
        chosen.append(rule)
    return tuple(chosen)


def unknown_codes(prefixes: list[str]) -> list[str]:
    """Prefixes that match no rule (a usage error: a typo should not silence a run)."""
    codes = [rule.code for rule in all_rules()]
    return [p for p in prefixes if not any(code.startswith(p.upper()) for code in codes)]
