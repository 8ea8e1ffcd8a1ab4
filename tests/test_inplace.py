"""One answer to "is this method call in-place?" (issue 18, item 2).

AGF003 and AGF009 each kept their own list of trailing-underscore methods that change no
value, and disagreed on four: `detach_`, `retain_grad_`, `pin_memory_`, `record_stream_`
(AGF003 said not in-place, AGF009 said in-place, so `w.data.detach_()` was reported as a
hidden in-place change of a parameter). Now `semantic/inplace.py` answers from the
vocabulary in `torch_api.py`, and both rules read that answer.
"""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.registry import rule_by_code
from autograd_fix.codemods.semantic.answer import Answer
from autograd_fix.codemods.semantic.inplace import inplace_method, is_inplace_call

AGF003, AGF009 = rule_by_code("AGF003"), rule_by_code("AGF009")

#: the four methods the two rules answered differently, and controls
DISPUTED = ("detach_", "retain_grad_", "pin_memory_", "record_stream_")
CASES = {
    **{method: Answer.NO for method in DISPUTED},
    "requires_grad_": Answer.NO,
    "share_memory_": Answer.NO,
    "add_": Answer.YES,
    "copy_": Answer.YES,
    "zero_": Answer.YES,
    "clamp_": Answer.YES,
    "add": Answer.NO,
    "_private_": Answer.NO,
    # not a torch method: a user's (or a newer torch's); the rules treat it as a mutation
    "renormalize_": Answer.UNKNOWN,
}


@pytest.mark.parametrize("method", sorted(CASES))
def test_the_answer_by_method(method: str) -> None:
    assert inplace_method(method) is CASES[method]


def test_a_function_of_an_imported_module_is_no_method_call() -> None:
    module = cst.parse_module("import torch.nn as nn\nnn.init.zeros_(w)\nw.zero_()\n")
    imports = ImportIndex.from_module(module)
    first, second = (statement.body[0].value for statement in module.body[1:])  # type: ignore[attr-defined]
    assert is_inplace_call(first, imports) is Answer.NO
    assert is_inplace_call(second, imports) is Answer.YES


def _leaf_source(method: str) -> str:
    call = f"{method}(2)" if CASES[method] is Answer.YES and method != "zero_" else f"{method}()"
    return textwrap.dedent(
        f"""
        import torch
        import torch.nn as nn

        w = nn.Parameter(torch.randn(3))
        y = (w * 2).sum()
        w.{call}
        y.backward()
        """
    ).lstrip()


def _data_source(method: str) -> str:
    call = f"{method}(2)" if CASES[method] is Answer.YES and method != "zero_" else f"{method}()"
    return textwrap.dedent(
        f"""
        import torch
        import torch.nn as nn

        model = nn.Linear(3, 3)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in [torch.randn(2, 3)]:
            loss = model(x).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            model.weight.data.{call}
        """
    ).lstrip()


@pytest.mark.parametrize("method", [*DISPUTED, "add_", "zero_", "renormalize_"])
def test_agf003_and_agf009_agree(method: str) -> None:
    mutates = CASES[method].possible
    leaf = check_source(_leaf_source(method), [AGF003], options=FixOptions(unsafe_fixes=True))
    # AGF003: an in-place change of a leaf that requires grad raises in backward
    assert bool(leaf.findings) is mutates
    data = check_source(_data_source(method), [AGF009], options=FixOptions(unsafe_fixes=True))
    # AGF009: `.data` is reported either way, as an in-place change only when it is one
    [finding] = data.findings
    assert ("in-place change" in finding.message) is mutates
