"""Is this class an `nn.Module`? Is this callee a module class? One answer, by evidence.

Issue 18 found three implementations of the question (the call graph's, the tracking
analysis's and the role evidence's) that split on 3 of 5 ordinary classes: a subclass of
`nn.Sequential` or of a same-file module without its own `forward`, a plain class with a
`forward`, a `LightningModule`, a class of a base imported from elsewhere. Here it is
answered once, three-valued (`Answer`), from what the code shows, never from how a name
is spelt:
- a base of torch's module classes (`nn.Module`, any module class of `torch.nn`,
  `torch.jit.ScriptModule`, a `LightningModule`) or a same-file class that is a module:
  YES;
- no base, or only bases that are certainly no module (`object`, `torch.autograd.Function`,
  an optimizer, a `Dataset`, Python's own `abc`/`enum`/`typing` classes): NO;
- a base this file cannot see (`from mmcv.runner import BaseModule`, the project's
  `BaseModel`): YES when the class's own code is a module's (it defines `forward`, or
  calls a method only an `nn.Module` has on `self`: `self.register_buffer(...)`,
  `self.parameters()`), else UNKNOWN.
The torch names are in the vocabulary module `codemods/torch_api.py`.
"""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.semantic.answer import Answer
from autograd_fix.codemods.torch_api import (
    MODULE_BASES,
    MODULE_ONLY_METHODS,
    NN_FUNCTION_NAMESPACES,
    NN_NON_MODULE_CLASSES,
    NON_MODULE_BASE_PREFIXES,
    NON_MODULE_BUILTIN_BASES,
)
from autograd_fix.codemods.walk import SyntaxIndex, find_all


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


def class_is_module(node: cst.ClassDef, imports: ImportIndex, known: Mapping[str, Answer]) -> Answer:
    """Is the class `node` an `nn.Module` subclass? `known`: the answers for the file's
    classes defined before it (its same-file bases)."""
    answers = [_base_answer(base.value, imports, known) for base in node.bases]
    if Answer.YES in answers:
        return Answer.YES
    if all(answer is Answer.NO for answer in answers):
        return Answer.NO
    return Answer.YES if _acts_as_module(node) else Answer.UNKNOWN


def module_classes(module: cst.Module, imports: ImportIndex, syntax: SyntaxIndex | None = None) -> dict[str, Answer]:
    """The answer for every class of the file, by name (nested classes too; a later class
    of the same name replaces an earlier one, as Python's binding does)."""
    classes = syntax.find(module, cst.ClassDef) if syntax is not None else find_all(module, cst.ClassDef)
    answers: dict[str, Answer] = {}
    for node in classes:
        assert isinstance(node, cst.ClassDef)
        answers[node.name.value] = class_is_module(node, imports, answers)
    return answers


def module_class_names(answers: Mapping[str, Answer]) -> frozenset[str]:
    """The names of the classes that are certainly modules."""
    return frozenset(name for name, answer in answers.items() if answer is Answer.YES)


def _base_answer(base: cst.BaseExpression, imports: ImportIndex, known: Mapping[str, Answer]) -> Answer:
    qualified = imports.qualified_name(base)
    if qualified is not None:
        return module_class_name(qualified)
    name = dotted_name(base)
    if name is None:
        return Answer.UNKNOWN  # `Base[T]`, `make_base()`
    if name in known:
        return known[name]
    return Answer.NO if name in NON_MODULE_BUILTIN_BASES else Answer.UNKNOWN


def _acts_as_module(node: cst.ClassDef) -> bool:
    """The class's own code is an `nn.Module`'s: it defines `forward`, or calls a method
    only a module has on `self`."""
    if any(isinstance(s, cst.FunctionDef) and s.name.value == "forward" for s in node.body.body):
        return True
    for call in find_all(node.body, cst.Call):
        func = call.func  # type: ignore[attr-defined]
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value in MODULE_ONLY_METHODS
            and isinstance(func.value, cst.Name)
            and func.value.value == "self"
        ):
            return True
    return False
