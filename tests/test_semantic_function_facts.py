"""Unit tests for the semantic facts the bug-corpus fixes added: Optional annotations and
in-place chains in tensor facts, ctx aliases in backward, callable aliases, one-line
bodies in tracking, and module getters that hand back module state."""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.semantic.autograd_function import TensorFacts, custom_function
from autograd_fix.codemods.rules.agf012_deprecated_autograd_api.callable_aliases import calls_of_alias
from autograd_fix.codemods.rules.agf005_tensor_saved_on_ctx.ctx_attributes import backward_aliases
from autograd_fix.codemods.rules.agf009_data_attribute.module_getters import is_getter, reaches_return, reads_module_state
from autograd_fix.codemods.semantic.tracking import TrackingAnalysis
from autograd_fix.codemods.walk import iter_descendants


def _module(source: str) -> tuple[cst.Module, ImportIndex]:
    module = cst.parse_module(textwrap.dedent(source).lstrip("\n"))
    return module, ImportIndex.from_module(module)


def _function(module: cst.CSTNode, name: str) -> cst.FunctionDef:
    return next(n for n in iter_descendants(module) if isinstance(n, cst.FunctionDef) and n.name.value == name)


SAMPLER = """
from typing import Optional, Union

import torch


class Sample(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loc, k: Optional[int] = None, flip: Union[bool, None] = None, mask: torch.Tensor | None = None):
        white = loc.new_empty(loc.shape).normal_()
        ctx.white, ctx.k = white, k
        return loc + white

    @staticmethod
    def backward(ctx, grad):
        eps = ctx.white
        k = ctx.k
        k = k or 1
        return grad * eps, None, None, None
"""


def test_optional_scalars_are_non_tensors_and_optional_tensor_is_a_tensor() -> None:
    module, imports = _module(SAMPLER)
    facts = TensorFacts(_function(module, "forward"), imports, skip_params=1)
    assert {"k", "flip"} <= facts.non_tensors
    assert "mask" in facts.tensors


def test_an_inplace_initialiser_chained_on_a_tensor_is_a_tensor() -> None:
    module, imports = _module(SAMPLER)
    forward = _function(module, "forward")
    facts = TensorFacts(forward, imports, skip_params=1)
    value = next(
        n
        for n in iter_descendants(forward)
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "normal_"
    )
    assert facts.is_tensor(value)
    assert "white" in facts.tensors


def test_backward_alias_lines_are_found_only_for_names_bound_once() -> None:
    module, _ = _module(SAMPLER)
    aliases = backward_aliases(_function(module, "backward"), "ctx", {"white", "k"})
    assert set(aliases) == {"white"}  # `k` is rebound by `k = k or 1`
    name, line = aliases["white"]
    assert name == "eps" and "ctx.white" in cst.Module(body=[line]).code


def test_custom_function_is_found_for_the_sampler() -> None:
    module, imports = _module(SAMPLER)
    classes = [n for n in iter_descendants(module) if isinstance(n, cst.ClassDef)]
    assert custom_function(classes[0], imports) is not None


ALIASES = """
import contextlib
import torch

def evaluate(model, batches, amp):
    autocast = torch.cuda.amp.autocast if amp else contextlib.nullcontext
    with torch.no_grad(), autocast(dtype=torch.float16):
        return [model(b) for b in batches]

def hand_on(model, amp):
    autocast = torch.cuda.amp.autocast
    return run_with(model, autocast)
"""


def test_calls_of_an_alias_are_listed_and_a_handed_on_alias_is_unknown() -> None:
    module, _ = _module(ALIASES)
    calls = calls_of_alias(_function(module, "evaluate"), "autocast")
    assert calls is not None and len(calls) == 1 and calls[0].args[0].keyword.value == "dtype"
    assert calls_of_alias(_function(module, "hand_on"), "autocast") is None


GETTER = """
import torch
from torch import nn


class Factors(nn.Module):
    def __init__(self, n, rank):
        super().__init__()
        self.factors = nn.ParameterList([nn.Parameter(torch.randn(rank, n)) for _ in range(2)])
        self.eps = 1e-3

    def forward(self):
        return self.factors[0].t() @ self.factors[1]

    def components(self, detach=False):
        out = []
        for f in range(2):
            if detach: out.append(self.factors[f].data)
            else: out.append(torch.abs(self.factors[f]).data.cpu())
        return out

    def norm(self):
        return float(self.factors[0].data.norm().item())
"""


def test_one_line_bodies_are_offered_as_suite_sites_with_their_facts() -> None:
    module, imports = _module(GETTER)
    analysis = TrackingAnalysis.build(module, imports)
    suites = list(analysis.suite_sites())
    assert len(suites) == 2
    assert all(site.position.function is not None and site.position.function.name.value == "components" for site in suites)
    plain_lines = {id(site.statement) for site in analysis.sites()}
    assert not plain_lines & {id(site.statement) for site in suites}
    assert analysis.site(suites[0].statement) is suites[0]


def test_module_getter_hands_back_state_read_through_data() -> None:
    module, imports = _module(GETTER)
    analysis = TrackingAnalysis.build(module, imports)
    info = analysis.classes["Factors"]
    components, norm = _function(module, "components"), _function(module, "norm")
    assert is_getter(components, info) and not is_getter(_function(module, "forward"), info)
    for site in analysis.suite_sites():
        data = next(n for n in iter_descendants(site.statement) if isinstance(n, cst.Attribute) and n.attr.value == "data")
        assert reads_module_state(data.value, info)
        assert reaches_return(components, site.statement, data)
    line = next(site.statement for site in analysis.sites() if site.position.function is norm)
    data = next(n for n in iter_descendants(line) if isinstance(n, cst.Attribute) and n.attr.value == "data")
    assert not reaches_return(norm, line, data)  # a float made from it, not a tensor handed back
