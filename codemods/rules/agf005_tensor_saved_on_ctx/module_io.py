"""Tensors a function gets from, or hands to, modules whose class this file defines.

RevTorch's `_ReversibleModuleFunction.forward` runs
`for block in blocks: assert isinstance(block, ReversibleBlock); x = block(x)`: nothing in
`forward` itself says `x` is a tensor, but `ReversibleBlock.forward` returns one
(`torch.cat(...)`) and takes its input as one (`torch.chunk(x, 2)`), so the module's own
code is the evidence. Only calls of a name the function asserts to be an instance of a
same-file module class count: a ModuleList item of unknown class, or a module returning
a tuple, proves nothing. Computed per function, only when a rule asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.semantic.autograd_function import TensorFacts, rebound_names, return_statements
from autograd_fix.codemods.semantic.answer import Answer
from autograd_fix.codemods.semantic.nn_modules import module_classes
from autograd_fix.codemods.walk import children_of


@dataclass(frozen=True)
class ModuleIO:
    """What calling an instance of one module class takes and gives, read from its `forward`."""

    #: every `return` of `forward` hands back one tensor
    returns_tensor: bool
    #: per positional input (after `self`): `forward` uses it where only a tensor works
    tensor_inputs: tuple[bool, ...]


@dataclass(frozen=True)
class ModuleCallTensors:
    """Module calls in one function whose result is a tensor, and names passed to tensor inputs."""

    #: ids of the `Call` nodes that return a tensor
    calls: frozenset[int]
    #: names passed where the module's `forward` needs a tensor
    inputs: frozenset[str]


def module_call_tensors(
    function: cst.FunctionDef, module: cst.Module, imports: ImportIndex, answers: Mapping[str, Answer] | None = None,
) -> ModuleCallTensors:
    """Module calls in `function` known to return tensors, and the names it passes to tensor
    inputs. `answers`: whether each class of the file is a module (`SemanticModel.module_classes`)."""
    if answers is None:
        answers = module_classes(module, imports)
    classes = {
        s.name.value: s for s in module.body if type(s) is cst.ClassDef and answers.get(s.name.value) is Answer.YES
    }
    found: list[tuple[cst.Call, str]] = []
    if classes:
        _typed_calls(list(_statements(function.body)), {}, classes, imports, found)
    signatures: dict[str, ModuleIO | None] = {}
    calls: set[int] = set()
    inputs: set[str] = set()
    for call, class_name in found:
        if class_name not in signatures:
            signatures[class_name] = module_io(classes[class_name], imports)
        io = signatures[class_name]
        if io is None:
            continue
        if io.returns_tensor:
            calls.add(id(call))
        for index, argument in enumerate(call.args):
            if argument.keyword is not None or argument.star:
                break
            if type(argument.value) is cst.Name and index < len(io.tensor_inputs) and io.tensor_inputs[index]:
                inputs.add(argument.value.value)
    return ModuleCallTensors(frozenset(calls), frozenset(inputs))


def module_io(node: cst.ClassDef, imports: ImportIndex) -> ModuleIO | None:
    """The tensor facts of a module class's `forward` (None without a plain `forward`)."""
    forward = next(
        (s for s in node.body.body if type(s) is cst.FunctionDef and s.name.value == "forward"), None
    )
    if forward is None or forward.asynchronous is not None:
        return None
    facts = TensorFacts(forward, imports, skip_params=1)
    returns = return_statements(forward)
    returns_tensor = bool(returns) and all(r.value is not None and facts.is_tensor(r.value) for r in returns)
    params = [*forward.params.posonly_params, *forward.params.params][1:]
    return ModuleIO(returns_tensor, tuple(p.name.value in facts.tensors for p in params))


def _statements(body: cst.BaseSuite) -> list[cst.BaseStatement]:
    return list(body.body) if type(body) is cst.IndentedBlock else []


def _typed_calls(
    statements: list[cst.BaseStatement],
    known: dict[str, str],
    classes: dict[str, cst.ClassDef],
    imports: ImportIndex,
    found: list[tuple[cst.Call, str]],
) -> None:
    """Calls `name(...)` made while `assert isinstance(name, Class)` still holds: after the
    assert in the same block (or an enclosing one), with `name` not rebound in between."""
    for statement in statements:
        if type(statement) in (cst.FunctionDef, cst.ClassDef):
            continue
        if type(statement) is cst.SimpleStatementLine:
            for small in statement.body:
                asserted = _asserted_instance(small, classes, imports)
                if asserted is not None:
                    known[asserted[0]] = asserted[1]
                elif type(small) is cst.Assign and type(small.value) is cst.Call:
                    func = small.value.func
                    if type(func) is cst.Name and func.value in known:
                        found.append((small.value, known[func.value]))
        else:
            rebound = rebound_names([statement])
            inner = {name: cls for name, cls in known.items() if name not in rebound}
            for block in _inner_blocks(statement):
                _typed_calls(list(block.body), dict(inner), classes, imports, found)
        for name in rebound_names([statement]):
            known.pop(name, None)


def _inner_blocks(node: cst.CSTNode) -> list[cst.IndentedBlock]:
    """The indented blocks of a compound statement (bodies, `else`, handlers, `finally`)."""
    blocks: list[cst.IndentedBlock] = []
    for child in children_of(node):  # syntactic children (libcst's `.children` rebuilds them)
        if type(child) is cst.IndentedBlock:
            blocks.append(child)
        elif not isinstance(child, (cst.BaseStatement, cst.BaseExpression)):
            blocks += _inner_blocks(child)
        elif type(child) is cst.If:
            blocks += _inner_blocks(child)  # `elif` chains
    return blocks


def _asserted_instance(
    small: cst.BaseSmallStatement, classes: dict[str, cst.ClassDef], imports: ImportIndex
) -> tuple[str, str] | None:
    """`assert isinstance(block, ReversibleBlock)` (parenthesised or not) -> ("block", "ReversibleBlock")."""
    if type(small) is not cst.Assert or type(small.test) is not cst.Call:
        return None
    call = small.test
    if not (type(call.func) is cst.Name and call.func.value == "isinstance") or imports.qualified_name(call.func):
        return None
    if len(call.args) != 2 or any(a.keyword is not None or a.star for a in call.args):
        return None
    instance, kind = call.args[0].value, call.args[1].value
    if type(instance) is cst.Name and type(kind) is cst.Name and kind.value in classes:
        return instance.value, kind.value
    return None
