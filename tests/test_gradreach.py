"""Unit tests for `codemods/rules/agf001_eval_forward_without_no_grad/gradreach.py`: does a forward's graph reach a gradient,
following control flow (branches joined, loops iterated, rebinding clears)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.names import last_segment
from autograd_fix.codemods.semantic.gradmode import find_grad_use
from autograd_fix.codemods.rules.agf001_eval_forward_without_no_grad.gradreach import graph_reaches_gradient
from autograd_fix.codemods.walk import iter_descendants


def _reaches(source: str) -> bool:
    """Follow the graph made by the statement marked `# start` in the file's function."""
    text = textwrap.dedent(source)
    module = cst.parse_module(text)
    imports = ImportIndex.from_module(module)
    function = next(node for node in module.body if isinstance(node, cst.FunctionDef))
    start = next(
        node for node in iter_descendants(function)
        if isinstance(node, cst.SimpleStatementLine) and node.trailing_whitespace.comment is not None
        and node.trailing_whitespace.comment.value == "# start"
    )
    return graph_reaches_gradient(
        function, start, imports,
        lambda statement: bool(find_grad_use(statement, imports).direct),
        lambda call: last_segment(call.func) == "model",
    )


def test_eval_branch_rebound_before_the_training_backward_does_not_reach() -> None:
    assert not _reaches(
        """
        def run(model, loader, optimizer, criterion, is_train):
            for x, y in loader:
                if is_train:
                    out = model(x)
                    loss = criterion(out, y)
                    loss.backward()
                    optimizer.step()
                else:
                    out = model(x)  # start
                    loss = criterion(out, y)
                total = loss.detach()
            return total
        """
    )


def test_branch_value_backpropagated_after_the_if_reaches() -> None:
    assert _reaches(
        """
        def run(model, loader, optimizer, criterion, first):
            for x, y in loader:
                if first:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                else:
                    loss = criterion(model(x), y)  # start
                loss.backward()
        """
    )


def test_value_kept_for_the_next_iteration_reaches_its_backward() -> None:
    assert _reaches(
        """
        def run(model, loader):
            previous = None
            for x in loader:
                if previous is not None:
                    previous.sum().backward()
                previous = model(x)  # start
        """
    )


@pytest.mark.parametrize(
    "use",
    [
        "return out",  # the caller may train on it
        "self.cache = out",  # stored on the object
        "history.append(out)",  # into a container others see
    ],
)
def test_graph_leaving_the_function_counts_as_reaching(use: str) -> None:
    assert _reaches(
        f"""
        def run(self, model, x, history):
            out = model(x)  # start
            {use}
        """
    )


def test_cut_values_do_not_carry_the_graph() -> None:
    assert not _reaches(
        """
        def run(model, x, history):
            out = model(x)  # start
            score = out.argmax(-1).float().mean().item()
            history.append(score)
            return score
        """
    )
