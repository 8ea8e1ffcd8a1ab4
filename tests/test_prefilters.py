"""The rules' prefilters (`codemods/prefilters.py`) are necessary conditions: text a
prefilter rejects is text on which its rule reports nothing.

A prefilter that wrongly rejects loses findings silently (the file is not even parsed
for that rule), so the claim is checked on every real text the project holds (the bug
corpus, the rules' own examples, `examples/`) and on generated files that spell in-place
operations every way Python allows (AGF003's prefilter is syntax, not a name).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autograd_fix.codemods.engine import FixOptions, check_source, parse_module, run_rules
from autograd_fix.codemods.prefilters import _GAP, _NAME_CHAR, PREFILTERS, prefilter, triggered_codes
from autograd_fix.codemods.registry import RuleRegistryError, all_rules, load_rule, rule_by_code, rule_codes
from autograd_fix.codemods.rule import Rule
from autograd_fix.codemods.torch_api import uses_torch

ROOT = Path(__file__).resolve().parents[1]


def _real_texts() -> list[tuple[str, str]]:
    """(name, text) of every Python text in the corpus, the rules' examples and examples/."""
    texts = [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted((ROOT / "tests" / "corpus").rglob("*.py"))]
    texts += [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted((ROOT / "examples").glob("*.py"))]
    for rule in all_rules():
        examples = rule.examples()
        for index, example in enumerate([*examples.valid, *examples.invalid]):
            texts.append((f"{rule.code} example {index}", example.source))
            if example.expected:
                texts.append((f"{rule.code} example {index} fixed", example.expected))
    return texts


def test_every_prefilter_belongs_to_a_rule() -> None:
    assert set(PREFILTERS) <= set(rule_codes())
    assert all(rule.triggers is None and rule.trigger_pattern is None for rule in all_rules())


def test_a_registered_rule_with_its_own_triggers_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its own triggers would make the engine's answer and the command line's (read from
    `codemods/prefilters.py` before any rule loads) differ."""
    rule = rule_by_code("AGF009")
    assert rule is not None
    monkeypatch.setattr(rule, "triggers", ("data",))
    load_rule.cache_clear()
    try:
        with pytest.raises(RuleRegistryError, match="prefilters.py"):
            load_rule("AGF009")
    finally:
        monkeypatch.undo()
        load_rule.cache_clear()
    assert load_rule("AGF009") is rule


def test_rules_rejected_by_their_prefilter_report_nothing_on_real_code() -> None:
    """Every rule a text's prefilters reject runs on it anyway: no finding."""
    checked = 0
    for name, text in _real_texts():
        if not uses_torch(text):
            continue
        rejected = [rule for rule in all_rules() if not rule.may_fire_on(text)]
        try:
            module = parse_module(text)
        except Exception:  # noqa: BLE001 - a deliberately broken example
            continue
        findings = run_rules(module, rejected, name, text, enabled=[rule.code for rule in all_rules()])
        assert findings == [], f"{name}: {[(f.code, f.span.line) for f in findings]} though the prefilter rejected the text"
        checked += len(rejected)
    assert checked > 500  # the texts do exercise the prefilters


# -- AGF003: generated files ------------------------------------------------------------
#: ways of making `t` a tensor autograd tracks (a leaf that requires grad, a parameter,
#: an output autograd saves), none of which spells an in-place operation
SETUPS = [
    "def step(model):\n    for t in model.parameters():\n        {stmt}\n",
    "t = nn.Parameter(torch.randn(3, 3))\n{stmt}\n",
    "def forward(x, weight):\n    t = torch.sigmoid(x @ weight)\n    {stmt}\n    return t.sum()\n",
    "def forward(x, weight):\n    t = torch.tanh(x.mm(weight))\n    {stmt}\n    t.sum().backward()\n",
    "t = torch.randn(3, requires_grad=True)\n{stmt}\n",
    "def train(x, w):\n    t = w.exp()\n    {stmt}\n    y = (t ** 2).sum()\n    y.backward()\n",
]
#: statements on `t`: in-place operations in many spellings, and look-alikes that are not
STATEMENTS = [
    "t.add_(1.0)", "t.add_ (1.0)", "t.mul_(\n        2)", "t . zero_()", "t.add_(  # the step\n        1)",
    "(t.mul_  # scaled\n        (2))", "t.mul_ \\\n        (2)", "t.clamp_(min=0)", "t.sigmoid_()", "t.my_norm_()",
    "t += 1", "t -= 0.1", "t *= 2", "t /= 2", "t **= 2", "t //= 2", "t %= 3", "t \\\n        += 1",
    "t[0] = 0.0", "t[0, 1] = 2.0", "(t[0]) = 1.0", "t[0] += 1", "t[:2].mul_(2)", "t [0]\\\n        = 5.0",
    "t.data.add_(1)", "F.relu(t, inplace=True)", "t = F.relu(t, inplace=True)", "F.dropout(t, 0.5, training=True, inplace=True)",
    "t.add(1)", "u = t + 1", "print(t)", "t.requires_grad_()", "t.detach_()", "u = t[0]", "u = t == 1",
    "u = t <= 1", "net = nn.Sequential(nn.Linear(3, 3), nn.Sigmoid(), nn.ReLU(True))",
    "net = nn.Sequential(nn.Linear(3, 3), nn.Sigmoid(), nn.ReLU(inplace=True))",
    "net = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.ReLU())", "net = nn.Sequential(nn.Sigmoid(), nn.LeakyReLU(0.1, True))",
]
HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def _program(setup: str, statements: list[str]) -> str:
    indent = setup.split("{stmt}")[0].rsplit("\n", 1)[-1]
    return HEADER + setup.format(stmt=f"\n{indent}".join(statements))


def _agf003_findings(text: str) -> list[tuple[int, str]]:
    """AGF003's findings with no prefilter at all (the rule run explicitly)."""
    rule = rule_by_code("AGF003")
    assert rule is not None
    return [(f.span.line, f.message) for f in run_rules(parse_module(text), [rule], "train.py", text)]


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(SETUPS), st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=3))
def test_agf003_never_fires_on_text_its_prefilter_rejects(setup: str, statements: list[str]) -> None:
    text = _program(setup, statements)
    if _agf003_findings(text):
        assert prefilter("AGF003").admits(text), text


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(SETUPS), st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=3))
def test_findings_are_the_same_with_and_without_the_prefilters(setup: str, statements: list[str]) -> None:
    text = _program(setup, statements)
    filtered = check_source(text, all_rules(), path="train.py", options=FixOptions(unsafe_fixes=True))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Rule, "may_fire_on", classmethod(lambda cls, text: True))
        every = check_source(text, all_rules(), path="train.py", options=FixOptions(unsafe_fixes=True))
    assert [(f.code, f.span, f.message) for f in filtered.findings] == [(f.code, f.span, f.message) for f in every.findings]
    assert filtered.fixed == every.fixed


@pytest.mark.parametrize(
    "statement",
    ["t.add_ (1.0)", "(t.mul_  # scaled\n        (2))", "t.mul_ \\\n        (2)", "(t[0]) = 1.0", "t \\\n        += 1", "t //= 2"],
)
def test_odd_spellings_of_an_inplace_update_are_found_and_admitted(statement: str) -> None:
    """The spellings the prefilter's pattern has to allow for: AGF003 reports each."""
    text = _program(SETUPS[0], [statement])
    assert _agf003_findings(text), text
    assert prefilter("AGF003").admits(text)


def test_a_file_without_inplace_syntax_is_rejected() -> None:
    text = HEADER + "def predict_scores(model, x):\n    scores = model(x)\n    return torch.softmax(scores, dim=-1)\n"
    assert "AGF003" not in triggered_codes(rule_codes(), text)
    assert not _agf003_findings(text)
    assert triggered_codes(rule_codes(), "import torch\n") == ()



def test_a_comment_banner_does_not_make_the_search_exponential() -> None:
    """A `####...` banner after `)` once split into comments in 2^n ways before the
    search failed (pytorch/examples hung): the search must take linear time. Run in a
    child process, so that a regression fails here instead of hanging the suite."""
    probe = (
        "from autograd_fix.codemods.prefilters import prefilter\n"
        "text = 'import torch\\nprint(x)  ' + '#' * 60 + '\\n' + ('# ' * 40 + '\\n') * 50\n"
        "print(prefilter('AGF003').admits(text))\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "False", run.stderr


#: the patterns as one regex each, as they were written before they were split into
#: alternatives for speed (`prefilters.AnyOf`): the split ones must answer the same
ONE_REGEX = {
    "AGF001": re.compile(
        r"(?:^|[^a-zA-Z])(?:val|valid|validate|validation|test|testing|eval|evaluate|evaluation|holdout|"
        r"predict|infer|inference)(?:$|[^a-z])|\.train\(False\)|\.(?:item|argmax|argmin|tolist|numpy|detach|max|"
        r"min|topk|sort)\(|\.data\b",
        re.M,
    ),
    "AGF003": re.compile(
        r"(?:[-+*/%@&|^]|<<|>>)="
        rf"|[\])]{_GAP}=(?!=)"
        rf"|(?<!{_NAME_CHAR})(?!_){_NAME_CHAR}+(?<=_){_GAP}\("
        r"|inplace|True"
    ),
}
#: texts at the edges of the patterns: words at the start and end of a text and of a
#: line, upper-case neighbours, every ending, operators that only look augmented
EDGE_TEXTS = [
    "val", "valx", "xval", "_val", "Val", "valid_", "validatex", "validation\n", "value", "interval", "eval", "evalu",
    "evaluate", "evaluations", "1test", "testing()", "testingX", "tests", "holdout", "holdouts", "predictor", "predict2",
    "infer", "inference", "inferences", "é_val", "x.data", "x.data_ptr", "x.dataset", ".train(False)", ".train( False)",
    "x.item (", "x.sort(", "x.sorted(", "a <= b", "a >= b", "a != b", "a == b", "a <<= 1", "a < <= 1", "a **= 2",
    "x[0] == 1", "x[0] = 1", "f(x) = 1", "x] \\\n = 1", "add_(", "_add(", "__init__(", "add_ # c\n(", "é_(", "x = True",
    "inplac", "Truth", "F.relu(x, inplace=False)", "a @= b", "a &= b", "a |= b", "a ^= b", "a >>= 1",
]


@pytest.mark.parametrize("code", sorted(ONE_REGEX))
def test_the_split_patterns_answer_as_the_one_regex_did(code: str) -> None:
    """`AnyOf`'s alternatives, tried one by one, admit exactly the texts the one regex
    admitted: every real text, each statement of the generated files, and edge cases."""
    texts = [text for _, text in _real_texts()] + STATEMENTS + [_program(setup, [stmt]) for setup in SETUPS for stmt in STATEMENTS]
    texts += EDGE_TEXTS + [f"{a} {b}" for a in EDGE_TEXTS for b in ("", "=", "(")]
    pattern = prefilter(code).pattern
    assert pattern is not None
    differ = [text for text in texts if (pattern.search(text) is None) != (ONE_REGEX[code].search(text) is None)]
    assert differ == []
    assert sum(ONE_REGEX[code].search(text) is None for text in texts) > 20  # both verdicts are exercised
