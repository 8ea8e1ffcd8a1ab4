"""Fixes that other linters accept: no import left unused by a fix (Ruff's F401), and
one-element unpacking spelt as `ruff format` writes it (`(x,) = ...`).

The corpus-wide checks need no Ruff: an import counts as unused here when the name it
binds is never loaded, deleted or mentioned in a string but a docstring (the F401
reading, without scopes). `benchmarks/linter_stability.py` measures the same with the real Ruff.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.registry import all_rules, rule_by_code

REPO = Path(__file__).resolve().parent.parent
UNSAFE = FixOptions(unsafe_fixes=True)
AGF012 = rule_by_code("AGF012")
AGF007 = rule_by_code("AGF007")


def fixed(source: str, rules=None) -> str:
    result = check_source(textwrap.dedent(source).lstrip(), rules or [AGF012], options=UNSAFE)
    assert result.fix_error is None, result.fix_error
    assert result.fixed is not None, "no fix"
    return result.fixed


def unused_imports(source: str) -> set[str]:
    """Names bound by imports that nothing loads, deletes or mentions in a string other
    than a docstring."""
    tree = ast.parse(source)
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            bound |= {alias.asname or alias.name for alias in node.names if alias.name != "*"}
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    prose = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}  # docstrings
    words = {
        word
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
        for word in re.findall(r"[A-Za-z_]\w*", node.value)
    }
    return bound - used - words


def bare_one_element_targets(source: str) -> int:
    """`x, = ...` and `for x, in ...`: one-element tuples without parentheses as targets."""
    module = cst.parse_module(source)
    count = 0

    class Visitor(cst.CSTVisitor):
        def visit_Tuple(self, node: cst.Tuple) -> None:
            nonlocal count
            count += len(node.elements) == 1 and not node.lpar

    module.visit(Visitor())
    return count


# -- unused imports --------------------------------------------------------------------

def test_the_variable_import_goes_with_its_last_use() -> None:
    after = fixed(
        """
        \"\"\"Training loop from 2017.\"\"\"

        from torch.autograd import Variable
        import torch


        def step(model, images):
            return model(Variable(images))
        """
    )
    assert "Variable" not in after
    # the docstring keeps its blank line; `import torch` stays (still used? no: kept
    # only because the fix did not touch it)
    assert after.startswith('"""Training loop from 2017."""\n\nimport torch\n')


def test_a_name_still_used_elsewhere_keeps_its_import_and_other_names_stay() -> None:
    after = fixed(
        """
        import torch
        from torch.autograd import Variable, grad

        def step(model, x):
            y = model(Variable(x))
            return grad(y.sum(), x)

        def legacy(x):
            return isinstance(x, Variable)
        """
    )
    assert "from torch.autograd import Variable, grad\n" in after
    only_grad = fixed(
        """
        import torch
        from torch.autograd import Variable, grad

        def step(model, x):
            y = model(Variable(x))
            return grad(y.sum(), x)
        """
    )
    assert "from torch.autograd import grad\n" in only_grad


def test_exported_or_named_in_a_string_keeps_its_import() -> None:
    for keeper in ('__all__ = ["Variable"]', 'def wrap(x: "Variable"):\n    return x'):
        after = fixed(
            f"""
import torch
from torch.autograd import Variable

{keeper}

def step(model, x):
    return model(Variable(x))
"""
        )
        assert "from torch.autograd import Variable\n" in after, keeper


def test_an_import_the_input_left_unused_is_not_ours_to_remove() -> None:
    after = fixed(
        """
        import os
        import torch
        from torch.autograd import Variable

        def step(model, x):
            return model(Variable(x))
        """
    )
    assert after.startswith("import os\nimport torch\n\ndef step")


def test_a_compatibility_shim_and_a_noqa_import_are_left_alone() -> None:
    shim = fixed(
        """
        import torch
        try:
            from torch.autograd import Variable
        except ImportError:
            Variable = None

        def step(model, x):
            return model(Variable(x))
        """
    )
    assert "    from torch.autograd import Variable\n" in shim
    kept = fixed(
        """
        import torch
        from torch.autograd import Variable  # noqa: F401 (re-exported)

        def step(model, x):
            return model(Variable(x))
        """
    )
    assert "from torch.autograd import Variable  # noqa: F401 (re-exported)\n" in kept


def test_a_function_local_import_goes_and_a_comment_above_an_import_stays() -> None:
    after = fixed(
        """
        import torch

        def step(model, x):
            from torch.autograd import Variable
            return model(Variable(x))

        # the old API, for the 0.3 checkpoints
        from torch.autograd import Variable as V
        import numpy as np

        def old(model, x):
            return model(V(x)) * np.pi
        """
    )
    assert "Variable" not in after
    assert "def step(model, x):\n    return model(x.detach())\n" in after
    assert "# the old API, for the 0.3 checkpoints\nimport numpy as np\n" in after


def test_amp_imports_the_rewrite_no_longer_needs_go() -> None:
    after = fixed(
        """
        import torch
        from torch.cuda.amp import autocast, GradScaler

        scaler = GradScaler()
        with autocast():
            loss = model(x)
        """
    )
    assert "torch.cuda.amp" not in after
    assert unused_imports(after) == set()


# -- formatting ------------------------------------------------------------------------

def test_one_saved_tensor_left_is_unpacked_as_ruff_format_writes_it() -> None:
    after = fixed(
        """
        import torch

        class LeakyClip(torch.autograd.Function):
            @staticmethod
            def forward(ctx, inputs, ceiling: float):
                ctx.save_for_backward(inputs, ceiling)
                return inputs.clamp(max=ceiling)

            @staticmethod
            def backward(ctx, grad):
                inputs, ceiling = ctx.saved_tensors
                return torch.where(inputs < ceiling, grad, 0.01 * grad), None
        """,
        [AGF007],
    )
    assert "        (inputs,) = ctx.saved_tensors\n" in after
    assert bare_one_element_targets(after) == 0


# -- every fix the project knows of ----------------------------------------------------

def _sources() -> list[pytest.param]:
    """The bug corpus's buggy files, the example scripts and every rule's INVALID
    examples: each with the rules that run on it."""
    rules = all_rules()
    found = [
        pytest.param(path.read_text(encoding="utf-8"), rules, id=str(path.relative_to(REPO)))
        for path in [*sorted((REPO / "tests" / "corpus").glob("*/buggy.py")), *sorted((REPO / "examples").glob("*.py"))]
    ]
    for rule in rules:
        for number, example in enumerate(rule.examples().invalid, start=1):
            if example.expected is not None:
                found.append(pytest.param(textwrap.dedent(example.source).lstrip("\n"), (rule,), id=f"{rule.code}-invalid-{number}"))
    return found


def test_no_fix_leaves_an_import_unused_or_a_bare_one_element_target() -> None:
    checked, regressions = 0, []
    for param in _sources():
        source, rules = param.values
        result = check_source(source, rules, options=UNSAFE)
        if result.fixed is None or result.fixed == source:
            continue
        checked += 1
        new_unused = unused_imports(result.fixed) - unused_imports(source)
        if new_unused:
            regressions.append(f"{param.id}: {sorted(new_unused)} left unused")
        if bare_one_element_targets(result.fixed) > bare_one_element_targets(source):
            regressions.append(f"{param.id}: a one-element target without parentheses")
    assert checked >= 150, checked  # the corpus, the examples and the rule examples
    assert regressions == []


def test_an_import_another_file_star_imports_stays(tmp_path) -> None:
    """spro/practical-pytorch: `train.py` does `from model import *` and calls `Variable`,
    which only `model.py` imports. Its AGF012 fix leaves `Variable` unused in `model.py`,
    but removing the import broke `train.py` (verification caught it: NameError)."""
    from autograd_fix.codemods.engine import FixOptions, check_source
    from autograd_fix.codemods.registry import select_rules

    model = (
        "import torch\nfrom torch.autograd import Variable\n\n\n"
        "def init_hidden(size):\n    return Variable(torch.zeros(1, size))\n"
    )
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(model)
    (tmp_path / "train.py").write_text("from model import *\n\nhidden = Variable(torch.zeros(1, 4))\n")
    rules = select_rules(["AGF012"], [])
    kept = check_source(model, rules, path=str(tmp_path / "model.py"), options=FixOptions(unsafe_fixes=True)).fixed
    assert kept is not None and "Variable(" not in kept and "from torch.autograd import Variable" in kept
    (tmp_path / "train.py").write_text("import torch\n\nhidden = torch.zeros(1, 4)\n")
    dropped = check_source(model, rules, path=str(tmp_path / "model.py"), options=FixOptions(unsafe_fixes=True)).fixed
    assert dropped is not None and "Variable" not in dropped
