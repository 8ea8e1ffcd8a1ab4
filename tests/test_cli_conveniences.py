"""Issue 20, item 8: the options users reach for from Ruff. Default path `.`,
`--extend-select`, `--exclude` / `--extend-exclude`, `--statistics`, `-q` / `-s`,
`.ignore` and `.git/info/exclude`, `--format json-lines | junit | gitlab`,
`--list-rules --format json`, and a file-level `# autograd-fix: noqa`."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograd_fix.cli.app import app
from autograd_fix.codemods.registry import all_rules
from test_cli import EVAL_LOOP
from test_result_cache import TRAIN  # AGF015 at line 6

EVALUATE = EVAL_LOOP  # AGF001 at line 11 (the validation loop)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AUTOGRAD_FIX_CACHE_DIR", str(tmp_path.parent / f"{tmp_path.name}-cache"))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TRAIN)
    (tmp_path / "src" / "evaluate.py").write_text(EVALUATE)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(app, ["--no-verify", *args])


def codes(output: str) -> list[str]:
    return sorted(line.split(": ", 1)[1].split()[0] for line in output.splitlines() if ": AGF" in line)


def test_without_a_path_the_current_folder_is_checked(project: Path) -> None:
    result = run()
    assert result.exit_code == 1
    assert codes(result.stdout) == ["AGF001", "AGF015"]
    assert "src/train.py:6:9: AGF015" in result.stdout


def test_extend_select_adds_to_the_configured_selection(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.autograd-fix]\nselect = ["AGF001"]\n')
    assert codes(run("src").stdout) == ["AGF001"]
    assert codes(run("src", "--extend-select", "AGF015").stdout) == ["AGF001", "AGF015"]
    assert codes(run("src", "--select", "AGF009", "--extend-select", "AGF015").stdout) == ["AGF015"]
    bad = run("src", "--extend-select", "AGF999")
    assert bad.exit_code == 2 and "unknown rule code or prefix: AGF999" in bad.stderr


def test_exclude_replaces_and_extend_exclude_adds_to_the_configured_exclude(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.autograd-fix]\nexclude = ["evaluate.py"]\n')
    assert codes(run("src").stdout) == ["AGF015"]
    assert codes(run("src", "--exclude", "train.py").stdout) == ["AGF001"]
    nothing = run("src", "--extend-exclude", "train.py")
    assert nothing.exit_code == 2 and "No Python files found in src" in nothing.stderr
    assert codes(run("src", "--exclude", "nothing.py").stdout) == ["AGF001", "AGF015"]
    bad = run("src", "--exclude", "\\")
    assert bad.exit_code == 2 and "--exclude" in bad.stderr


def test_statistics_count_findings_per_rule(project: Path) -> None:
    (project / "src" / "train_b.py").write_text(TRAIN)
    text = run("--statistics", "--unsafe-fixes")
    assert text.exit_code == 1
    assert text.stdout.splitlines() == [
        "2\tAGF015\t[*] zero-grad-set-to-none-false",
        "1\tAGF001\t[*] eval-forward-without-no-grad",
    ]
    rows = json.loads(run("--statistics", "--format", "json").stdout)
    assert rows[0] == {"code": "AGF015", "name": "zero-grad-set-to-none-false", "count": 2, "fixable": 0}
    assert [row["code"] for row in rows] == ["AGF015", "AGF001"]


def test_quiet_drops_the_summary_and_silent_prints_nothing(project: Path) -> None:
    loud = run("src")
    quiet = run("src", "-q")
    assert quiet.exit_code == loud.exit_code == 1
    assert quiet.stdout == "".join(loud.stdout.splitlines(keepends=True)[:-1])
    assert "Found" not in quiet.stdout
    silent = run("src", "--silent")
    assert (silent.exit_code, silent.stdout) == (1, "")
    missing = run("src", "nowhere", "-s")
    assert missing.exit_code == 2 and "nowhere" in missing.stderr


def test_ignore_files_and_the_repository_exclude_hold(project: Path) -> None:
    (project / ".git" / "info").mkdir(parents=True)
    (project / ".git" / "info" / "exclude").write_text("src/train.py\n")
    assert codes(run(".").stdout) == ["AGF001"]
    (project / "src" / ".gitignore").write_text("!train.py\n")  # a .gitignore overrides info/exclude
    assert codes(run(".").stdout) == ["AGF001", "AGF015"]
    (project / "src" / ".ignore").write_text("evaluate.py\ntrain.py\n")  # .ignore overrides .gitignore
    result = run(".")
    assert codes(result.stdout) == [] and result.exit_code == 2  # nothing left to check


def test_json_lines_has_one_finding_per_line(project: Path) -> None:
    result = run("src", "--format", "json-lines")
    assert result.exit_code == 1
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(entry["path"], entry["code"], entry["line"]) for entry in lines] == [
        ("src/evaluate.py", "AGF001", 11), ("src/train.py", "AGF015", 6)
    ]
    assert lines[0]["fix"]["applicability"] == "safe" and "no_grad" in lines[0]["fix"]["diff"]
    (project / "clean.py").write_text("import torch\n")
    clean = run("clean.py", "--format", "json-lines")
    assert (clean.exit_code, clean.stdout) == (0, "")


def test_junit_has_a_failed_case_per_finding(project: Path) -> None:
    result = run("src", "--format", "junit")
    assert result.exit_code == 1
    root = ElementTree.fromstring(result.stdout)
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "2", "0")
    cases = {(suite.get("name"), case.get("name"), case.get("line")) for suite in root for case in suite}
    assert cases == {("src/evaluate.py", "autograd-fix.AGF001", "11"), ("src/train.py", "autograd-fix.AGF015", "6")}
    assert all(case.find("failure") is not None for suite in root for case in suite)
    (project / "clean.py").write_text("import torch\n")
    clean = ElementTree.fromstring(run("clean.py", "--format", "junit").stdout)
    assert clean.get("failures") == "0" and clean.find("testsuite/testcase").get("name") == "No findings"


def test_gitlab_code_quality_with_stable_fingerprints(project: Path) -> None:
    first = run("src", "--format", "gitlab")
    assert first.exit_code == 1
    issues = json.loads(first.stdout)
    assert [(i["check_name"], i["location"]["path"], i["location"]["lines"]["begin"]) for i in issues] == [
        ("AGF001", "src/evaluate.py", 11), ("AGF015", "src/train.py", 6)
    ]
    assert all(i["severity"] == "major" and len(i["fingerprint"]) > 16 for i in issues)
    assert json.loads(run("src", "--format", "gitlab").stdout) == issues  # from the cache: the same
    path = project / "src" / "train.py"
    path.write_text("# a comment moves every line\n" + TRAIN)
    moved = json.loads(run("src", "--format", "gitlab").stdout)
    assert moved[1]["location"]["lines"]["begin"] == 7 and moved[1]["fingerprint"] == issues[1]["fingerprint"]


def test_list_rules_as_json(project: Path) -> None:
    result = run("--list-rules", "--format", "json")
    assert result.exit_code == 0
    rules = json.loads(result.stdout)
    assert [rule["code"] for rule in rules] == [rule.code for rule in all_rules()]
    assert all(set(rule) == {"code", "name", "fix", "summary", "explanation"} for rule in rules)
    assert all(rule["summary"] and rule["explanation"] for rule in rules)


@pytest.mark.parametrize(
    ("comment", "left"),
    [
        ("# autograd-fix: noqa", []),
        ("# autograd-fix: noqa: AGF015", ["AGF001"]),
        ("  #autograd-fix:NOQA: agf001, AGF015", []),
        ("# autograd-fix: noqa: AGF009", ["AGF001", "AGF015"]),
        ("x = 1  # autograd-fix: noqa", ["AGF001", "AGF015"]),  # not a comment line of its own
    ],
)
def test_a_file_level_noqa(project: Path, comment: str, left: list[str]) -> None:
    both = EVALUATE + "\n\n" + TRAIN.replace("import torch\n", "").replace("def fit(", "def fit_more(")
    (project / "src" / "evaluate.py").write_text(comment + "\n" + both)
    (project / "src" / "train.py").unlink()
    assert codes(run("src").stdout) == left


def test_add_noqa_silences_every_finding_and_a_second_run_adds_none(project: Path) -> None:
    (project / "src" / "crlf.py").write_bytes(TRAIN.replace("\n", "\r\n").encode())
    first = run("--add-noqa")
    assert (first.exit_code, first.stdout.strip()) == (0, "Added 3 noqa comments in 3 files.")
    text = (project / "src" / "train.py").read_text()
    assert "optimizer.zero_grad(set_to_none=False)  # noqa: AGF015\n" in text
    assert b"# noqa: AGF015\r\n" in (project / "src" / "crlf.py").read_bytes()
    compile(text, "train.py", "exec")
    clean = run()
    assert (clean.exit_code, clean.stdout.strip()) == (0, "No findings.")
    assert run("--add-noqa").stdout.strip() == "Added 0 noqa comments in 0 files."


def test_add_noqa_merges_codes_and_leaves_lines_that_cannot_take_a_comment() -> None:
    from autograd_fix.cli.add_noqa import with_noqa
    from autograd_fix.cli.runner import FindingRecord

    def at(line: int, code: str) -> FindingRecord:
        return FindingRecord("m.py", line, 1, line, 2, code, "name", "message", None, False)

    text = (
        "a = f(x)  # noqa: AGF009\n"
        "b = g(x)  # noqa\n"
        'c = h("""\n'
        'text""")\n'
        "d = 1 + \\\n"
        "    2\n"
        "e = k(x)  # a comment\n"
    )
    edit = with_noqa(text, [at(1, "AGF001"), at(1, "AGF009"), at(2, "AGF003"), at(3, "AGF016"), at(5, "AGF009"), at(7, "AGF002")])
    assert edit.text.splitlines() == [
        "a = f(x)  # noqa: AGF009, AGF001",
        "b = g(x)  # noqa",
        'c = h("""',
        'text""")',
        "d = 1 + \\",
        "    2",
        "e = k(x)  # a comment  # noqa: AGF002",
    ]
    assert (edit.added, edit.skipped) == (2, (3, 5))
    compile(edit.text, "m.py", "exec")


def test_add_noqa_refuses_diff_and_apply(project: Path) -> None:
    result = run("--add-noqa", "--diff")
    assert result.exit_code == 2 and "--add-noqa cannot be combined" in result.stderr
