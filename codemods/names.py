"""Identifier heuristics shared by rules: what a name says about its role.

Rules use these only as *supporting* evidence (a loop over `val_loader` that calls a
model); a name alone never triggers a rewrite.
"""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.imports import dotted_name
from autograd_fix.codemods.semantic.roles import name_tokens

__all__ = ["name_tokens", "last_segment", "expression_tokens", "receiver_name", "method_name", "iterable_tokens", "WRAPPING_ITERATORS"]


def last_segment(node: cst.BaseExpression) -> str | None:
    """`self.model.encoder` -> 'encoder'; `model` -> 'model'; anything else -> None."""
    if type(node) is cst.Name:
        return node.value
    if type(node) is cst.Attribute:
        return node.attr.value
    return None


def expression_tokens(node: cst.BaseExpression) -> set[str]:
    """Tokens of every identifier and string key in a Name/Attribute/Subscript/Call chain.

    `self.loaders["val"]` -> {'self', 'loaders', 'val'}; `dm.val_dataloader()` ->
    {'dm', 'val', 'dataloader'}.
    """
    tokens: set[str] = set()
    current: cst.BaseExpression | None = node
    while current is not None:
        if type(current) is cst.Name:
            tokens.update(name_tokens(current.value))
            current = None
        elif type(current) is cst.Attribute:
            tokens.update(name_tokens(current.attr.value))
            current = current.value
        elif type(current) is cst.Subscript:
            for element in current.slice:
                index = element.slice
                if type(index) is cst.Index and type(index.value) is cst.SimpleString:
                    tokens.update(name_tokens(index.value.evaluated_value if isinstance(index.value.evaluated_value, str) else ""))
            current = current.value
        elif type(current) is cst.Call:
            current = current.func
        else:
            current = None
    return tokens


def receiver_name(call: cst.Call) -> str | None:
    """`model.eval()` -> 'model'; `self.net.eval()` -> 'self.net'."""
    if type(call.func) is cst.Attribute:
        return dotted_name(call.func.value)
    return None


def method_name(call: cst.Call) -> str | None:
    """`x.backward()` -> 'backward'; plain calls -> None."""
    if type(call.func) is cst.Attribute:
        return call.func.attr.value
    return None


#: calls that wrap an iterable without changing what it yields items of
#: (``for i, (x, y) in enumerate(tqdm(val_loader))`` iterates ``val_loader``)
WRAPPING_ITERATORS = frozenset({"enumerate", "tqdm", "tqdm_notebook", "zip", "iter", "list", "islice", "track"})


def iterable_tokens(node: cst.BaseExpression) -> set[str]:
    """Tokens naming what a loop iterates, looking through the `WRAPPING_ITERATORS`."""
    if type(node) is cst.Call and last_segment(node.func) in WRAPPING_ITERATORS:
        tokens: set[str] = set()
        for argument in node.args:
            if argument.keyword is None:
                tokens |= iterable_tokens(argument.value)
        return tokens
    return expression_tokens(node)
