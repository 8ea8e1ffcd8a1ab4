"""Small helpers for building replacement expressions that keep their meaning.

Replacing a call by one of its arguments (`Variable(a + b).sum()` -> `(a + b).sum()`)
or by a method chain on it must not change operator precedence; these helpers add the
parentheses that keep the tree's meaning when the new text is printed.
"""

from __future__ import annotations

import libcst as cst

#: expressions that print as a single primary: safe as a receiver, an operand, anywhere
_ATOMIC = (
    cst.Name,
    cst.Attribute,
    cst.Call,
    cst.Subscript,
    cst.SimpleString,
    cst.ConcatenatedString,
    cst.FormattedString,
    cst.Integer,
    cst.Float,
    cst.Imaginary,
    cst.List,
    cst.Dict,
    cst.Set,
    cst.ListComp,
    cst.SetComp,
    cst.DictComp,
    cst.Ellipsis,
)


def is_atomic(expression: cst.BaseExpression) -> bool:
    """True when `expression` prints as a primary (a name, call, literal or parenthesized)."""
    return isinstance(expression, _ATOMIC) or bool(getattr(expression, "lpar", ()))


def parenthesized(expression: cst.BaseExpression) -> cst.BaseExpression:
    """`expression`, wrapped in parentheses unless it is already atomic."""
    if is_atomic(expression):
        return expression
    return expression.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def method_call(receiver: cst.BaseExpression, method: str, *args: cst.Arg) -> cst.Call:
    """`receiver.method(*args)`, parenthesizing the receiver when needed."""
    return cst.Call(func=cst.Attribute(value=parenthesized(receiver), attr=cst.Name(method)), args=args)


def method_chain(node: cst.BaseExpression) -> tuple[cst.BaseExpression, list[tuple[str, cst.Call | None]]]:
    """Split `x.a().b.c()` into its root `x` and [('a', call), ('b', None), ('c', call)].

    Subscripts and calls of non-attributes end the chain (they become the root).
    """
    links: list[tuple[str, cst.Call | None]] = []
    current = node
    while True:
        if type(current) is cst.Call and type(current.func) is cst.Attribute:
            links.append((current.func.attr.value, current))
            current = current.func.value
        elif type(current) is cst.Attribute:
            links.append((current.attr.value, None))
            current = current.value
        else:
            break
    links.reverse()
    return current, links


def is_true(node: cst.BaseExpression) -> bool:
    """The literal ``True``."""
    return type(node) is cst.Name and node.value == "True"


def is_false(node: cst.BaseExpression) -> bool:
    """The literal ``False``."""
    return type(node) is cst.Name and node.value == "False"
