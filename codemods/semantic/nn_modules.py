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
The torch names are in the vocabulary module `codemods/torch_api.py`; what a base says
and how the answers combine are in `module_bases` (libcst-free, so that the verifier's
`ast` reading asks the same functions).
"""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex, dotted_name
from autograd_fix.codemods.semantic.answer import Answer
from autograd_fix.codemods.semantic.module_bases import base_answer, class_answer, module_class_name
from autograd_fix.codemods.torch_api import MODULE_ONLY_METHODS
from autograd_fix.codemods.walk import SyntaxIndex, find_all

#: `module_class_name` is asked through this module too (its home is `module_bases`)
__all__ = ["class_is_module", "module_class_name", "module_class_names", "module_classes"]


def class_is_module(node: cst.ClassDef, imports: ImportIndex, known: Mapping[str, Answer]) -> Answer:
    """Is the class `node` an `nn.Module` subclass? `known`: the answers for the file's
    classes defined before it (its same-file bases)."""
    answers = [base_answer(imports.qualified_name(base.value), dotted_name(base.value), known) for base in node.bases]
    return class_answer(answers, _acts_as_module(node))


def module_classes(module: cst.Module, imports: ImportIndex, syntax: SyntaxIndex | None = None) -> dict[str, Answer]:
    """The answer for every class of the file, by name (nested classes too; a later class
    of the same name replaces an earlier one, as Python's binding does)."""
    classes = syntax.find(module, cst.ClassDef) if syntax is not None else find_all(module, cst.ClassDef)
    answers: dict[str, Answer] = {}
    for node in classes:
        assert type(node) is cst.ClassDef
        answers[node.name.value] = class_is_module(node, imports, answers)
    return answers


def module_class_names(answers: Mapping[str, Answer]) -> frozenset[str]:
    """The names of the classes that are certainly modules."""
    return frozenset(name for name, answer in answers.items() if answer is Answer.YES)


def _acts_as_module(node: cst.ClassDef) -> bool:
    """The class's own code is an `nn.Module`'s: it defines `forward`, or calls a method
    only a module has on `self`."""
    if any(type(s) is cst.FunctionDef and s.name.value == "forward" for s in node.body.body):
        return True
    for call in find_all(node.body, cst.Call):
        func = call.func  # type: ignore[attr-defined]
        if (
            type(func) is cst.Attribute
            and func.attr.value in MODULE_ONLY_METHODS
            and type(func.value) is cst.Name
            and func.value.value == "self"
        ):
            return True
    return False
