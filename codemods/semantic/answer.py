"""`Answer`: what the semantic model says to a yes/no question about the code.

A static reading often cannot tell: a base class from another file, a method a newer
torch added. Such a question is answered `UNKNOWN`, not guessed, and each rule decides
what an unknown means for it (stay silent, or propose an unsafe fix for verification to
judge). A question has one implementation in `codemods/semantic/`; rules that need it ask
it rather than keep their own variant, so two rules never answer it differently.
"""

from __future__ import annotations

from enum import Enum


class Answer(Enum):
    """Yes, no, or unknown: the three answers to one question about the code."""

    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"

    @property
    def possible(self) -> bool:
        """Not ruled out (`YES` or `UNKNOWN`): for a rule that treats unknown as yes."""
        return self is not Answer.NO

    def __bool__(self) -> bool:
        raise TypeError("an Answer is three-valued: compare with Answer.YES / .NO / .UNKNOWN or use .possible")
