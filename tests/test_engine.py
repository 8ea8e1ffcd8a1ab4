"""Engine behaviour with stand-in rules: composition, safety nets, imports, noqa."""

from __future__ import annotations

import libcst as cst
import pytest

from autograd_fix.codemods.engine import EngineError, FixOptions, check_source
from autograd_fix.codemods.imports import ImportIndex, add_imports
from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.rule import Contract, Rule

CONTRACT = Contract(description="test", checks=("outputs_equal",))


class RenameLoss(Rule):
    """Renames every `loss` name to `loss_value` (a stand-in safe fix)."""

    code, name, safety, message, contract = "AGF900", "rename-loss", Applicability.SAFE, "rename", CONTRACT
    triggers = ("loss",)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "loss":
            self.report(node, fix=Fix(Applicability.SAFE, (Edit(node, lambda n: n.with_changes(value="loss_value")),), "rename"))


class WrapCalls(Rule):
    """Turns every call `f(a)` into `g(h(a))`, nested calls included."""

    code, name, safety, message, contract = "AGF901", "wrap-calls", Applicability.SAFE, "wrap", CONTRACT
    triggers = ("f(",)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "f":
            edit = Edit(node, lambda n: cst.Call(func=cst.Name("g"), args=[cst.Arg(n.with_changes(func=cst.Name("h")))]))
            self.report(node, fix=Fix(Applicability.SAFE, (edit,), "wrap"))


class BreakCode(Rule):
    """Produces an invalid tree (a `return` at module level compiles to an error)."""

    code, name, safety, message, contract = "AGF902", "break-code", Applicability.SAFE, "break", CONTRACT
    triggers = ("x",)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if isinstance(node.body[0], cst.Return):
            return
        edit = Edit(node, lambda n: cst.SimpleStatementLine(body=[cst.Return(value=cst.Name("x"))]))
        self.report(node, fix=Fix(Applicability.SAFE, (edit,), "break"))


class NeverDone(Rule):
    """Always finds something to fix: the engine must give up, not loop forever."""

    code, name, safety, message, contract = "AGF903", "never-done", Applicability.SAFE, "grow", CONTRACT
    triggers = ("x",)

    def visit_Integer(self, node: cst.Integer) -> None:
        edit = Edit(node, lambda n: n.with_changes(value=str(int(n.value) + 1)))
        self.report(node, fix=Fix(Applicability.SAFE, (edit,), "grow"))


class NeedsTorch(Rule):
    """Replaces `pass` with `torch.no_grad` usage that needs an import."""

    code, name, safety, message, contract = "AGF904", "needs-torch", Applicability.UNSAFE, "import", CONTRACT
    triggers = ("pass",)

    def visit_Pass(self, node: cst.Pass) -> None:
        expression, needs = self.context.imports.expression_for("torch.no_grad")
        edit = Edit(node, lambda n: cst.Expr(cst.Call(func=expression)))
        self.report(node, fix=Fix(Applicability.UNSAFE, (edit,), "use torch", needs))


def test_fixes_of_several_rules_and_nested_places_all_apply() -> None:
    result = check_source("loss = f(f(loss))  # torch\n", [RenameLoss, WrapCalls])
    assert result.fixed == "loss_value = g(h(g(h(loss_value))))  # torch\n"
    assert len(result.findings) == 4


def test_fix_that_does_not_compile_is_dropped_with_a_note() -> None:
    source = "x = 1  # torch\n"
    result = check_source(source, [BreakCode])
    assert result.fixed in (None, source)
    assert any("does not compile" in note for note in result.notes)


def test_non_converging_fixes_are_dropped() -> None:
    result = check_source("x = 1  # torch\n", [NeverDone])
    assert result.fixed is None
    assert "did not converge" in (result.fix_error or "")


def test_unsafe_fixes_need_the_option_and_imports_are_added() -> None:
    source = '"""Doc (torch)."""\nfrom __future__ import annotations\nimport os\n\npass\n'
    assert check_source(source, [NeedsTorch]).fixed is None
    fixed = check_source(source, [NeedsTorch], options=FixOptions(unsafe_fixes=True)).fixed
    assert fixed == '"""Doc (torch)."""\nfrom __future__ import annotations\nimport torch\nimport os\n\ntorch.no_grad()\n'


def test_existing_alias_is_reused_instead_of_importing() -> None:
    fixed = check_source("import torch as T\npass\n", [NeedsTorch], options=FixOptions(unsafe_fixes=True)).fixed
    assert fixed == "import torch as T\nT.no_grad()\n"


def test_prefilter_skips_parsing() -> None:
    """No trigger of the rule, or no sign of PyTorch use at all: not parsed with libcst.
    A torch file that CPython's parser rejects is still an error (`python_syntax`), as
    the command line reports it before it would load libcst; a file without torch is
    left to Python's own tools."""
    assert check_source("import torch\nx = g(1)\n", [WrapCalls]).module is None
    with pytest.raises(EngineError, match="syntax error at 2:"):
        check_source("import torch\nthis is not python (\n", [WrapCalls])
    result = check_source("loss = 1; this is not python (\n", [RenameLoss])
    assert result.findings == [] and result.module is None


def test_codes_the_caller_already_admitted_give_the_same_result_as_the_prefilters() -> None:
    """The command line runs the prefilters to decide whether to load libcst and hands
    their answer on (`admitted`): the check must be the one the engine's own prefilter
    pass gives, findings, fixed text and all, and the codes name only rules that run."""
    from autograd_fix.codemods.prefilters import triggered_codes
    from autograd_fix.codemods.registry import lazy_rules

    text = "import torch\n\ndef evaluate(model, x):\n    model.eval()\n    return model(x).sum().item()\n"
    rules = lazy_rules()
    admitted = triggered_codes(rules.codes, text)
    assert "AGF001" in admitted
    options = FixOptions(unsafe_fixes=True)
    plain = check_source(text, rules, path="e.py", options=options)
    handed = check_source(text, rules, path="e.py", options=options, admitted=admitted)
    assert plain.findings and [f.code for f in handed.findings] == [f.code for f in plain.findings]
    assert handed.fixed == plain.fixed and handed.findings == plain.findings
    without = check_source(text, rules, path="e.py", options=options, admitted=[c for c in admitted if c != "AGF001"])
    assert "AGF001" not in {f.code for f in without.findings}


def test_crlf_survives_fixes() -> None:
    result = check_source("a = loss\r\nb = torch\r\n", [RenameLoss])
    assert result.fixed == "a = loss_value\r\nb = torch\r\n"


def test_qualified_names_through_aliases() -> None:
    module = cst.parse_module(
        "import torch as T\nfrom torch import no_grad as ng\nimport torch.nn.functional as F\nimport torch.autograd\n"
    )
    index = ImportIndex.from_module(module)
    assert index.qualified_name(cst.parse_expression("T.no_grad")) == "torch.no_grad"
    assert index.qualified_name(cst.parse_expression("ng")) == "torch.no_grad"
    assert index.qualified_name(cst.parse_expression("F.relu")) == "torch.nn.functional.relu"
    assert index.qualified_name(cst.parse_expression("torch.autograd.grad")) == "torch.autograd.grad"
    assert index.qualified_name(cst.parse_expression("model.eval")) is None
    assert index.local_name_for("torch.no_grad") == "ng"


def test_add_imports_is_idempotent() -> None:
    module = cst.parse_module("import torch\nx = 1\n")
    assert add_imports(module, ["import torch"]).code == "import torch\nx = 1\n"


def test_fixing_code_that_compiles_with_a_syntax_warning_is_silent_and_works_under_W_error() -> None:
    """`0x1for` compiles with a SyntaxWarning: the engine's own compile checks must not
    print it (found by the fuzz campaign as stray '<autograd-fix>:2: SyntaxWarning' lines)
    nor, with warnings as errors, reject the fix as code that does not compile."""
    import warnings

    text = "x = [0x1for i in range(3)]\nloss = 1\nbad = (\n"
    fixed = "x = [0x1for i in range(3)]\nloss_value = 1\n"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = check_source("import torch\n" + fixed.replace("loss_value", "loss"), [RenameLoss])
        errors = []
        try:
            check_source("import torch\n" + text, [RenameLoss])
        except Exception as error:  # a syntax error is reported with CPython's position
            errors.append(str(error))
    assert result.fixed == "import torch\n" + fixed
    assert [str(w.message) for w in caught] == []
    assert errors and "never closed" in errors[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_source("import torch\n" + fixed.replace("loss_value", "loss"), [RenameLoss]).fixed == "import torch\n" + fixed


MANUAL_SGD = """\
import torch

x = torch.rand(20, 1)
y = 3 * x + 5
w = torch.randn(1, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
for iteration in range(100):
    loss = ((y - (w * x + b)) ** 2).mean()
    loss.backward()
    # update the parameters
    b.data.sub_(0.01 * b.grad)
    w.data.sub_(0.01 * w.grad)
"""


def test_two_rules_rewriting_the_same_update_lines_both_hold() -> None:
    # greebear/pytorch-learning#1 (tests/corpus/agf002_13): AGF009 folds both `.data`
    # updates into one `with torch.no_grad():` block and AGF002 adds zeroing after the
    # last one; together they once dropped the update of `b` and its comment
    from autograd_fix.codemods.registry import all_rules

    rules = [r for r in all_rules() if r.code in {"AGF002", "AGF009"}]
    result = check_source(MANUAL_SGD, rules, path="train.py", options=FixOptions(unsafe_fixes=True))
    assert {f.code for f in result.findings} == {"AGF002", "AGF009"}
    fixed = result.fixed
    assert fixed is not None
    assert "# update the parameters\n" in fixed
    assert "b.sub_(0.01 * b.grad)" in fixed and "w.sub_(0.01 * w.grad)" in fixed
    assert "b.grad = None" in fixed and "w.grad = None" in fixed
    assert ".data" not in fixed
    again = check_source(fixed, rules, path="train.py", options=FixOptions(unsafe_fixes=True))
    assert [f for f in again.findings if f.fix is not None] == []


def test_a_fix_that_needs_a_statement_another_removed_is_a_conflict_not_half_applied() -> None:
    from autograd_fix.codemods.engine import FixConflict, apply_fixes

    module = cst.parse_module("a = 1\nb = 2\n")
    first = module.body[0]
    remove = Fix(Applicability.SAFE, (Edit(first, lambda node: cst.RemovalSentinel.REMOVE),), "remove")
    append = Fix(
        Applicability.SAFE,
        (Edit(first, lambda node: cst.FlattenSentinel([node, cst.parse_statement("c = 3\n")])),),
        "append",
    )
    # insertion first, then removal of the statement itself: both hold
    assert apply_fixes(module, [append, remove]) == "c = 3\nb = 2\n"
    # removal first: the insertion has no statement to follow
    try:
        apply_fixes(module, [remove, append])
    except FixConflict:
        pass
    else:
        raise AssertionError("a conflicting pair was applied")
    # as data, the two collide: the composition takes the first and defers the other to
    # the next round, which runs the rules again on the result
    from autograd_fix.codemods.engine import StatementCode, target_paths
    from autograd_fix.codemods.text_fixes import compose, materialize

    paths, codes = target_paths(module, [remove, append]), StatementCode(module)
    as_data = [materialize(module, fix, paths, codes) for fix in (remove, append)]
    composition = compose(module.code, as_data)
    assert (composition.text, composition.applied, composition.deferred) == ("b = 2\n", (0,), (1,))


def test_a_fix_that_writes_another_rules_trigger_is_followed_in_the_same_run() -> None:
    # fuzz campaign (CI): AGF012 rewrites `Variable(x.data)` to `x.detach()`, which is
    # what AGF001's prefilter looks for; the first run must already apply AGF001's fix,
    # or a second run changes the file again
    from autograd_fix.codemods.registry import all_rules

    source = "import torch\n\ndef features(encoder, x):\n    h = torch.autograd.Variable((encoder(x) + 1).data)\n    return h\n"
    options = FixOptions(unsafe_fixes=True)
    first = check_source(source, all_rules(), path="feats.py", options=options)
    # `.data` cuts the graph as `.detach()` does, so AGF001 sees the original at once now;
    # either way the first run must leave nothing for a second one
    assert {"AGF001", "AGF012"} <= {f.code for f in first.findings}
    assert first.fixed is not None and "@torch.no_grad()" in first.fixed and "Variable" not in first.fixed
    again = check_source(first.fixed, all_rules(), path="feats.py", options=options)
    assert [f for f in again.findings if f.fix is not None] == []


def test_checking_a_file_leaves_the_collector_s_thresholds_as_they_were() -> None:
    """`check_source` collects less often while a file is checked (a parse's live tree is
    not re-scanned thousands of times), and puts the process's thresholds back after; it
    never lowers a threshold a caller set higher."""
    import gc

    from autograd_fix.codemods.engine import GC_YOUNG_THRESHOLD, fewer_collections
    from autograd_fix.codemods.registry import all_rules

    old = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        seen: list[tuple[int, ...]] = []
        with fewer_collections():
            seen.append(gc.get_threshold())
        assert seen == [(GC_YOUNG_THRESHOLD, 10, 10)] and gc.get_threshold() == (700, 10, 10)
        check_source("import torch\nmodel.eval()\nout = model(x)\n", all_rules(), path="t.py")
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(50_000, 5, 5)
        with fewer_collections():
            assert gc.get_threshold() == (50_000, 5, 5)
        assert gc.get_threshold() == (50_000, 5, 5)
    finally:
        gc.set_threshold(*old)
