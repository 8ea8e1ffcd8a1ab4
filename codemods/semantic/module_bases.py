"""The libcst-free core of "is this class an `nn.Module`?": what each base says, and how
the bases and the class's own code combine into one `Answer`.

`nn_modules` reads a libcst tree with it, and the verifier (`verification/units.py`,
which reads Python's `ast` and must not import libcst) reads an `ast` tree with the same
functions, so that the two never answer the question differently. The torch names are in
the vocabulary module `codemods/torch_api.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from autograd_fix.codemods.semantic.answer import Answer
from autograd_fix.codemods.torch_api import (
    MODULE_BASES,
    NN_FUNCTION_NAMESPACES,
    NN_NON_MODULE_CLASSES,
    NON_MODULE_BASE_PREFIXES,
    NON_MODULE_BUILTIN_BASES,
)


def module_class_name(qualified: str) -> Answer:
    """Does the imported name `qualified` (`torch.nn.Linear`) name a module class?

    Within `torch.nn` the answer is torch's own convention (its classes are capitalised,
    its functions are not; the few classes that are no module are listed); outside it,
    only the listed module bases say YES and the listed non-module families NO."""
    if qualified in MODULE_BASES:
        return Answer.YES
    if qualified.startswith("torch.nn."):
        last = qualified.rsplit(".", 1)[-1]
        if qualified.startswith(NN_FUNCTION_NAMESPACES) or last in NN_NON_MODULE_CLASSES or not last[:1].isupper():
            return Answer.NO
        return Answer.YES
    if qualified.startswith(NON_MODULE_BASE_PREFIXES) or qualified in NON_MODULE_BUILTIN_BASES:
        return Answer.NO
    return Answer.UNKNOWN


def base_answer(qualified: str | None, name: str | None, known: Mapping[str, Answer]) -> Answer:
    """What one base says: `qualified`, its imported name (None: not imported); `name`,
    its dotted spelling (None: `Base[T]`, `make_base()`); `known`, the answers for the
    file's classes defined before."""
    if qualified is not None:
        return module_class_name(qualified)
    if name is None:
        return Answer.UNKNOWN
    if name in known:
        return known[name]
    return Answer.NO if name in NON_MODULE_BUILTIN_BASES else Answer.UNKNOWN


def class_answer(bases: Sequence[Answer], acts_as_module: bool) -> Answer:
    """A class is a module when a base is one; none when every base is certainly none (or
    it has no base); else its own code decides (`acts_as_module`: it defines `forward` or
    calls a method only a module has on `self`), and without that it is UNKNOWN."""
    if Answer.YES in bases:
        return Answer.YES
    if all(answer is Answer.NO for answer in bases):
        return Answer.NO
    return Answer.YES if acts_as_module else Answer.UNKNOWN
