"""AGF100 unused-noqa with the other rules enabled (the example tests run it alone): a
code another rule uses stays, an unused one is reported and removed, and comments that
`--add-noqa` writes are never unused."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograd_fix.cli.app import app
from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.registry import all_rules, select_rules
from test_result_cache import TRAIN  # AGF015 at line 6

NOQA_TRAIN = TRAIN.replace(
    "optimizer.zero_grad(set_to_none=False)", "optimizer.zero_grad(set_to_none=False)  # noqa: AGF015, AGF009"
).replace("loss.backward()", "loss.backward()  # noqa: AGF002")


def test_a_used_code_stays_and_unused_ones_are_reported() -> None:
    result = check_source(NOQA_TRAIN, all_rules(), path="train.py")
    assert [(f.code, f.span.line, f.message) for f in result.findings] == [
        ("AGF100", 6, "unused `noqa` code: AGF009 (nothing to suppress)"),
        ("AGF100", 8, "unused `noqa` code: AGF002 (nothing to suppress)"),
    ]
    assert "optimizer.zero_grad(set_to_none=False)  # noqa: AGF015\n" in result.fixed
    assert "        loss.backward()\n" in result.fixed
    again = check_source(result.fixed, all_rules(), path="train.py", options=FixOptions())
    assert again.findings == []


def test_a_code_the_run_does_not_enable_is_reported_as_such() -> None:
    rules = select_rules(None, ["AGF015"])
    messages = [f.message for f in check_source(NOQA_TRAIN, rules, path="train.py").findings]
    assert messages[0] == "unused `noqa` code: AGF015 (not enabled), AGF009 (nothing to suppress)"


def test_without_the_rule_nothing_is_judged() -> None:
    assert check_source(NOQA_TRAIN, select_rules(None, ["AGF100"]), path="train.py").findings == []


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path


def test_noqa_comments_added_by_add_noqa_are_used(project: Path) -> None:
    assert CliRunner().invoke(app, ["--no-verify", "--add-noqa"]).exit_code == 0
    clean = CliRunner().invoke(app, ["--no-verify"])
    assert (clean.exit_code, clean.stdout.strip()) == (0, "No findings.")
    (project / "train.py").write_text((project / "train.py").read_text().replace("set_to_none=False", "set_to_none=True"))
    stale = CliRunner().invoke(app, ["--no-verify"])
    assert stale.exit_code == 1 and "train.py:6:48: AGF100 [*] unused `noqa` code: AGF015" in stale.stdout
