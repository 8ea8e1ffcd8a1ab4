"""Unit tests for `module_io`: tensors a custom Function's forward gets from, or hands to,
modules whose class the file defines, and `kept_output` (forward's output kept on ctx)."""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.semantic.autograd_function import TensorFacts, custom_function, top_level_body
from autograd_fix.codemods.rules.agf005_tensor_saved_on_ctx.ctx_attributes import kept_output
from autograd_fix.codemods.rules.agf005_tensor_saved_on_ctx.module_io import module_call_tensors, module_io
from autograd_fix.codemods.walk import iter_descendants

REVERSIBLE = """
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x, scale=1.0):
        x1, x2 = torch.chunk(x, 2, dim=1)
        return torch.cat([x1, x2 + self.f(x1) * scale], dim=1)


class Pair(nn.Module):
    def forward(self, x):
        return x, x


class Run(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, blocks, pairs):
        for block in blocks:
            assert isinstance(block, Block)
            x = block(x)
        for pair in pairs:
            assert isinstance(pair, Pair)
            twice = pair(x)
        after = block(x)
        ctx.y = x
        return x

    @staticmethod
    def backward(ctx, dy):
        y = ctx.y
        del ctx.y
        return dy * y, None, None
"""


def _parse(source: str) -> tuple[cst.Module, ImportIndex]:
    module = cst.parse_module(textwrap.dedent(source).lstrip("\n"))
    return module, ImportIndex.from_module(module)


def _class(module: cst.Module, name: str) -> cst.ClassDef:
    return next(s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == name)


def _calls_of(node: cst.CSTNode, callee: str) -> list[cst.Call]:
    return [
        n for n in iter_descendants(node)
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == callee
    ]


def test_a_module_forward_that_takes_and_returns_one_tensor() -> None:
    module, imports = _parse(REVERSIBLE)
    io = module_io(_class(module, "Block"), imports)
    assert io is not None and io.returns_tensor and io.tensor_inputs == (True, False)
    pair = module_io(_class(module, "Pair"), imports)
    assert pair is not None and not pair.returns_tensor


def test_only_calls_of_asserted_instances_count_and_only_while_the_assert_holds() -> None:
    module, imports = _parse(REVERSIBLE)
    function = custom_function(_class(module, "Run"), imports)
    assert function is not None and function.forward is not None
    found = module_call_tensors(function.forward, module, imports)
    inside, after = _calls_of(function.forward, "block")
    assert id(inside) in found.calls
    assert id(after) not in found.calls  # the loop rebinds `block`: the assert no longer holds
    assert not any(id(call) in found.calls for call in _calls_of(function.forward, "pair"))  # returns a tuple
    assert found.inputs == {"x"}


def test_a_parameter_rebound_to_module_outputs_is_a_tensor() -> None:
    module, imports = _parse(REVERSIBLE)
    function = custom_function(_class(module, "Run"), imports)
    assert function is not None and function.forward is not None
    found = module_call_tensors(function.forward, module, imports)
    facts = TensorFacts(function.forward, imports, skip_params=1, tensor_calls=found.calls, tensor_params=found.inputs)
    assert "x" in facts.tensors
    assert "x" not in TensorFacts(function.forward, imports, skip_params=1).tensors


def test_kept_output_is_the_returned_name_not_rebound_after_the_store() -> None:
    module, imports = _parse(REVERSIBLE)
    function = custom_function(_class(module, "Run"), imports)
    assert function is not None and function.forward is not None
    body = top_level_body(function.forward)
    position = next(i for i, s in enumerate(body) if "ctx.y" in module.code_for_node(s))
    assert kept_output(function.forward, position, cst.Name("x"))
    assert not kept_output(function.forward, position, cst.Name("after"))
    rebound, _ = _parse(REVERSIBLE.replace("        return x\n", "        x = x * 2\n        return x\n"))
    forward = custom_function(_class(rebound, "Run"), imports).forward  # type: ignore[union-attr]
    assert forward is not None and not kept_output(forward, position, cst.Name("x"))
