"""Unit tests for `codemods/semantic/module_calls.py`: which calls run a model, from evidence."""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.rule import RuleContext
from autograd_fix.codemods.semantic.module_calls import (
    ModelCalls,
    ModelScope,
    module_argument,
    module_parameters,
    update_eval_state,
)


def _function(source: str) -> tuple[cst.FunctionDef, ImportIndex, cst.Module]:
    module = cst.parse_module(textwrap.dedent(source))
    function = next(node for node in module.body if isinstance(node, cst.FunctionDef))
    return function, ImportIndex.from_module(module), module


def _never_a_model(name: str) -> bool:
    return False


def test_eval_receiver_method_counts_only_with_methods_and_a_used_result() -> None:
    function, imports, _ = _function(
        """
        def eval_psnr(loader, mdl):
            for batch in loader:
                mdl.reset_cache()
                pred = mdl.infer(batch)
        """
    )
    scope = ModelScope(_never_a_model, receivers=frozenset({"mdl"}))
    assert not ModelCalls(scope, imports).runs_model(function.body)
    assert ModelCalls(scope, imports, methods=True).runs_model(function.body)
    dropped_only, imports, _ = _function(
        """
        def eval_psnr(loader, mdl):
            for batch in loader:
                mdl.reset_cache()
        """
    )
    assert not ModelCalls(scope, imports, methods=True).runs_model(dropped_only.body)


def test_torch_api_constructors_and_no_grad_blocks_are_not_forwards() -> None:
    function, imports, _ = _function(
        """
        import torch
        def run(model, x):
            y = torch.relu(x)
            net = Net(4)
            with torch.no_grad():
                out = model(x)
        """
    )
    scope = ModelScope(lambda name: name in {"model", "net"})
    assert not ModelCalls(scope, imports).runs_model(function.body)


def test_parameters_every_caller_binds_to_a_module() -> None:
    module = cst.parse_module(
        textwrap.dedent(
            """
            from torch import nn
            def evaluate(mod, inp):
                return mod(inp)
            evaluate(nn.Linear(2, 2), x)
            evaluate(inp=y, mod=model)
            """
        )
    )
    imports = ImportIndex.from_module(module)
    function = next(node for node in module.body if isinstance(node, cst.FunctionDef))
    sites = [
        statement.body[0].value for statement in module.body
        if isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Expr)
    ]
    semantic = RuleContext("evaluate.py", module).semantic
    is_module = lambda argument: module_argument(  # noqa: E731
        argument, semantic.is_module(argument, argument), lambda name: name == "model"
    )
    assert module_parameters(function, sites, False, is_module) == {"mod"}
    assert module_parameters(function, sites[:1] + [cst.parse_expression("evaluate(data, x)")], False, is_module) == set()
    assert module_parameters(function, [], False, is_module) == set()


def test_eval_state_follows_eval_and_train_calls() -> None:
    receivers: set[str] = set()
    for line in ("model.eval()", "teacher.train(False)", "model.train()"):
        update_eval_state(cst.parse_statement(line), receivers)
    assert receivers == {"teacher"}


def test_only_receivers_with_methods_counts_an_eval_receivers_own_method_alone() -> None:
    function, imports, _ = _function(
        """
        def demo(net, model, image):
            out = net.forward_srgb2xyz(image)
            other = model.encode(image)
            keys = net.keys()
        """
    )
    calls = ModelCalls(ModelScope(lambda name: name == "model", receivers=frozenset({"net"})), imports,
                       only_receivers=True, methods=True)
    found = [call for call in function.body.body if calls.runs_model(call)]
    assert [cst.Module([]).code_for_node(statement).strip() for statement in found] == [
        "out = net.forward_srgb2xyz(image)"
    ]
