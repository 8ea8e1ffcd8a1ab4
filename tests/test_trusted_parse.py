"""The engine's parse skips libcst's re-validation of its own parser's nodes (speed,
issue 18): the tree must be libcst's, and every node built by hand must still be
validated, in this thread and in any other."""

from __future__ import annotations

import threading
from pathlib import Path

import libcst as cst
import pytest

from autograd_fix.codemods.engine import EngineError
from autograd_fix.codemods.engine import parse_module as engine_parse
from autograd_fix.codemods.trusted_parse import parse_module

CORPUS = Path(__file__).parent / "corpus"


def _invalid_node() -> None:
    """A node libcst's validation rejects: a binary operation with a parenthesis opened
    and never closed."""
    cst.BinaryOperation(left=cst.Name("a"), operator=cst.Add(), right=cst.Name("b"), lpar=[cst.LeftParen()])


def test_the_tree_is_libcst_s_own_for_every_corpus_file() -> None:
    texts = [path.read_text(encoding="utf-8") for path in sorted(CORPUS.glob("*/buggy.py"))]
    assert len(texts) > 50
    for index, text in enumerate(texts):
        trusted = parse_module(text)
        assert trusted.code == text
        if index % 10 == 0:  # node for node (a slow comparison: every tenth file)
            assert trusted.deep_equals(cst.parse_module(text))


def test_nodes_built_by_hand_are_still_validated() -> None:
    parse_module("import torch\nx = torch.ones(2, requires_grad=True)\n")
    with pytest.raises(cst.CSTValidationError):
        _invalid_node()


def test_a_syntax_error_leaves_validation_on() -> None:
    with pytest.raises(EngineError, match="syntax error at 2"):
        engine_parse("import torch\nloss = (model(x)\n")
    with pytest.raises(cst.CSTValidationError):
        _invalid_node()


def test_another_thread_validates_while_this_one_parses() -> None:
    """The language server builds nodes on one thread while another analyses: a parse on
    one thread must not switch validation off for the other."""
    text = "".join(
        f"def step_{i}(model, optimizer, batch):\n"
        f"    out = model(batch['x'])\n"
        f"    loss = (out - batch['y']).pow(2).mean()\n"
        f"    optimizer.zero_grad()\n"
        f"    loss.backward()\n"
        f"    optimizer.step()\n"
        f"    return loss.item()\n\n"
        for i in range(400)
    )
    parsing = threading.Event()
    done = threading.Event()
    outcomes: list[bool] = []

    def build_by_hand() -> None:
        parsing.wait(5)
        while not done.is_set():
            try:
                _invalid_node()
                outcomes.append(False)
            except cst.CSTValidationError:
                outcomes.append(True)

    builder = threading.Thread(target=build_by_hand)
    builder.start()
    try:
        parsing.set()
        parse_module(text)
    finally:
        done.set()
        builder.join()
    assert outcomes and all(outcomes)
