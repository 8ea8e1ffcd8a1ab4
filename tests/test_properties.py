"""Property tests: the tool never crashes, and every fix parses, compiles and is stable."""

from __future__ import annotations

from collections import Counter

import hypothesmith
import pytest
import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograd_fix.codemods.engine import FixOptions, check_source, run_rules
from autograd_fix.codemods.registry import all_rules

ALL = all_rules()
OPTIONS = FixOptions(unsafe_fixes=True)


@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # generated code like `1()` compiles with a warning
def test_generated_programs_never_crash() -> None:
    """Any program (with `import torch` so no rule is skipped) is analysed without an
    exception escaping; a fix the engine computes is never dropped for producing code
    that does not parse, compile or converge (its `fix_error`); what it produces
    compiles and a second run leaves it alone. Programs the engine cannot take (libcst
    rejects them, or they do not compile to begin with) are counted, and most of the
    generated programs must be taken, or the property proved nothing."""
    seen: Counter[str] = Counter()

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(hypothesmith.from_grammar())
    def check(source: str) -> None:
        text = "import torch\n" + source
        try:
            cst.parse_module(text)
            compile(text, "<generated>", "exec")
        except Exception:
            seen["skipped"] += 1  # hypothesmith emits what libcst or the compiler rejects
            return
        seen["checked"] += 1
        result = check_source(text, ALL, options=OPTIONS)
        assert result.fix_error is None, result.fix_error
        if result.fixed is None:
            return
        seen["fixed"] += 1
        compile(result.fixed, "<fixed>", "exec")
        again = check_source(result.fixed, ALL, options=OPTIONS)
        assert again.fix_error is None and again.fixed is None

    check()
    assert seen["checked"] > seen["skipped"], seen


IDENTIFIERS = st.sampled_from(["model", "net", "self.model", "backbone", "detector", "seg_model"])
LOADERS = st.sampled_from(["val_loader", "test_loader", "self.val_dataloader()", "eval_batches", "loaders['val']"])
IMPORTS = st.sampled_from(
    [
        ("import torch\n", "torch.no_grad()"),
        ("import torch as T\n", "T.no_grad()"),
        ("from torch import no_grad\n", "no_grad()"),
        ("import numpy as np\n", None),
        ("", None),
    ]
)
FUNCTION_NAMES = st.sampled_from(["evaluate", "validate", "run", "compute_metrics", "predict_step", "main"])
DECORATORS = st.sampled_from(["", "@staticmethod\n", "@functools.wraps(f)\n", "@T.no_grad()\n", "@torch.inference_mode()\n"])


@st.composite
def evaluation_programs(draw) -> str:
    imports, _ = draw(IMPORTS)
    model = draw(IDENTIFIERS)
    loader = draw(LOADERS)
    loop_kind = draw(st.sampled_from(["for", "while", "enumerate"]))
    nesting = draw(st.integers(min_value=0, max_value=2))
    use_eval = draw(st.booleans())
    keep = draw(st.booleans())
    grads = draw(st.sampled_from(["", "out.sum().backward()", "x.requires_grad_()", "g = x.grad"]))
    comment = draw(st.sampled_from(["", "  # eval", "  # noqa: AGF001"]))
    wrapped_in_class = draw(st.booleans())

    body: list[str] = []
    if use_eval:
        body.append(f"{model}.eval()")
    body.append("outs = []")
    if loop_kind == "for":
        head = f"for x in {loader}:{comment}"
    elif loop_kind == "enumerate":
        head = f"for i, x in enumerate({loader}):{comment}"
    else:
        body.append(f"it = iter({loader})")
        head = f"while True:{comment}"
    loop = [head]
    indent = "    "
    inner: list[str] = []
    if loop_kind == "while":
        inner += ["try:", "    x = next(it)", "except StopIteration:", "    break"]
    for level in range(nesting):
        inner.append("    " * level + f"for part{level} in range(2):")
    pad = "    " * nesting
    inner.append(pad + f"out = {model}(x)")
    if keep:
        inner.append(pad + "outs.append(out)")
    if grads:
        inner.append(pad + grads)
    loop += [indent + line for line in inner]
    body += loop
    body.append("return outs")
    name = draw(FUNCTION_NAMES)
    decorator = draw(DECORATORS)
    params = "self, val_loader, test_loader, eval_batches, loaders" if wrapped_in_class else "model, net, backbone, detector, seg_model, val_loader, test_loader, eval_batches, loaders"
    function = decorator + f"def {name}({params}):\n" + "".join(f"    {line}\n" for line in body)
    if wrapped_in_class:
        function = "class Trainer:\n" + "".join(f"    {line}\n" if line else "\n" for line in function.splitlines())
    return "import functools\n" + imports + "\n\n" + function


@settings(max_examples=150, deadline=None)
@given(evaluation_programs())
def test_fixes_of_generated_eval_loops_compile_and_are_idempotent(source: str) -> None:
    compile(source, "<generated>", "exec")
    result = check_source(source, ALL, options=OPTIONS)
    assert result.fix_error is None, result.fix_error
    if result.fixed is None:
        return
    compile(result.fixed, "<fixed>", "exec")
    module = cst.parse_module(result.fixed)
    assert [f for f in run_rules(module, ALL, "<fixed>") if f.fix is not None] == []
    assert check_source(result.fixed, ALL, options=OPTIONS).fixed is None


@settings(max_examples=80, deadline=None)
@given(evaluation_programs())
def test_gradient_users_are_never_rewritten(source: str) -> None:
    """A loop that backpropagates, asks for input grads or reads `.grad` is left alone."""
    if not any(marker in source for marker in (".backward()", "requires_grad_()", ".grad")):
        return
    result = check_source(source, [r for r in ALL if r.code == "AGF001"], options=OPTIONS)
    assert result.findings == []
