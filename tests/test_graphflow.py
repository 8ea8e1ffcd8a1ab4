"""Unit tests for `codemods/graphflow.py`: which values carry a graph out of a function."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from autograd_fix.codemods.semantic.graphflow import GraphFlow, graph_flow
from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.names import last_segment


def _is_model_call(call: cst.Call) -> bool:
    """The tests' forward passes: `model(...)`, `self.model(...)`, `model.decode(...)`."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in {"decode", "encode"}:
        func = func.value
    return last_segment(func) == "model"


def _flow(source: str) -> GraphFlow:
    module = cst.parse_module(textwrap.dedent(source))
    function = next(node for node in module.body if isinstance(node, cst.FunctionDef))
    return graph_flow(function, ImportIndex.from_module(module), _is_model_call)


def _dies_inside(flow: GraphFlow) -> bool:
    return flow.built and not flow.returned and not flow.escapes


@pytest.mark.parametrize(
    "body",
    [
        "return model(x).argmax(1)",
        "return model(x).sum().item()",
        "logits = model(x)\nreturn (logits.argmax(-1) == y).float().mean().item()",
        "_, idx = torch.max(model(x), dim=1)\nreturn idx",
        "scores = model(x)\nreturn scores.detach()",
        "out = model(x)\nreturn out.shape",
        "out = model(x)\nprint(f'{out}')",
        "preds = []\nfor b in x:\n    preds.append(model(b).argmax(1))\nreturn torch.cat(preds)",
    ],
)
def test_graph_cut_before_leaving(body: str) -> None:
    source = "import torch\n\ndef f(model, x, y):\n" + textwrap.indent(body, "    ") + "\n"
    assert _dies_inside(_flow(source)), body


@pytest.mark.parametrize(
    "body",
    [
        "return model(x)",
        "vals, _ = model(x).max(1)\nreturn vals",
        "out = model(x)\nreturn out.loss",
        "losses = {'box': model(x)}\nreturn losses['box']",
        "preds = []\nfor b in x:\n    preds.append(model(b))\nreturn preds",
        "h = model(x)\nh = h * 2\nreturn h + 1",
        "yield model(x)",
    ],
)
def test_graph_returned(body: str) -> None:
    source = "import torch\n\ndef f(model, x, y):\n" + textwrap.indent(body, "    ") + "\n"
    flow = _flow(source)
    assert flow.built and flow.returned, body


@pytest.mark.parametrize(
    "body",
    [
        "self.cache = model(x)",
        "self.outputs.append(model(x))",
        "outputs.append(model(x))",  # a parameter: the caller's list
        "agent = rref.local_value()\nagent.saved.append(model(x))",  # an alias of an outside object
        "global LAST\nLAST = model(x).argmax()",
        "store = {}\nstore = self.buffers\nstore['x'] = model(x)",
        "acts = []\nmodel.layer.register_forward_hook(lambda m, i, o: acts.append(o))\nreturn model(x).argmax(), acts",
        "acts = []\ndef save(m, i, o):\n    acts.append(o)\nh = model.register_forward_hook(save)\nreturn model(x).argmax()",
    ],
)
def test_graph_stored_where_the_caller_sees_it(body: str) -> None:
    source = "def f(self, model, x, outputs, rref):\n" + textwrap.indent(body, "    ") + "\n"
    assert _flow(source).escapes, body


def test_local_containers_are_not_escapes() -> None:
    flow = _flow(
        """
        import torch

        def f(model, batches):
            logits = []
            stats = {}
            for batch in batches:
                out = model(batch)
                logits.append(out)
                stats["n"] = out.shape[0]
            return torch.cat(logits).argmax(-1)
        """
    )
    assert _dies_inside(flow)


def test_no_model_call_builds_nothing() -> None:
    assert not _flow("def f(x):\n    return x.argmax()\n").built
