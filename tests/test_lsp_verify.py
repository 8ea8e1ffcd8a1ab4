"""The language server's verify-and-apply policy, with verdicts stubbed (no worker)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from autograd_fix import verification
from autograd_fix.cli.lsp_analysis import DocumentSettings, analyse
from autograd_fix.cli.lsp_verify import source_bytes, verify_document
from autograd_fix.cli.verify_patches import VerifySettings
from autograd_fix.verification import Verdict
from test_cli import EVAL_LOOP

EVAL_LINE = EVAL_LOOP.splitlines().index("    for x, y in val_loader:  # validation") + 1
RETAIN = textwrap.dedent(
    """\
    import torch


    def train(model, train_loader, criterion, optimizer):
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward(retain_graph=True)
            optimizer.step()
    """
)


def _verdicts(monkeypatch: pytest.MonkeyPatch, verdict: str) -> None:
    def stub(next_pair, on_verdict, **kwargs):
        while (item := next_pair()) is not None:
            key, pair = item
            on_verdict(key, Verdict(verdict, f"stubbed {verdict}", pair.get("rule"), ()))

    monkeypatch.setattr(verification.api, "verify_stream", stub)


def _report(text: str, tmp_path: Path, unsafe_fixes: bool = False):
    path = tmp_path / "train.py"
    analysis = analyse(text, 1, str(path), DocumentSettings(unsafe_fixes=unsafe_fixes))
    return verify_document(source_bytes(text), analysis, VerifySettings(), lambda: object())


def test_accepted_fix_is_applied(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _verdicts(monkeypatch, "accepted")
    report = _report(EVAL_LOOP, tmp_path)
    assert report.fixed is not None and "with torch.no_grad():" in report.fixed
    assert [(v["code"], v["applicability"], v["verdict"], v["applied"]) for v in report.verdicts] == [("AGF001", "safe", "accepted", True)]


def test_rejected_fix_is_never_applied(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _verdicts(monkeypatch, "rejected")
    report = _report(EVAL_LOOP, tmp_path, unsafe_fixes=True)
    assert report.fixed is None
    assert report.summary() == f"AGF001 line {EVAL_LINE}: rejected: stubbed rejected (not applied)"


@pytest.mark.parametrize(("unsafe_fixes", "applied"), [(False, False), (True, False)])
def test_an_unverified_fix_is_never_applied_from_the_editor(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, unsafe_fixes: bool, applied: bool) -> None:
    _verdicts(monkeypatch, "unverified")
    report = _report(RETAIN, tmp_path, unsafe_fixes=unsafe_fixes)
    (verdict,) = report.verdicts
    assert (verdict["code"], verdict["applicability"], verdict["applied"]) == ("AGF011", "unsafe", applied)
    assert (report.fixed is not None) is applied


def test_buffer_is_encoded_as_it_declares() -> None:
    text = "# -*- coding: latin-1 -*-\nname = 'café'\n"
    assert source_bytes(text) == text.encode("latin-1")
    with pytest.raises(ValueError, match="latin-1"):
        source_bytes(text + "emoji = '😀'\n")


def test_the_projects_roles_reach_the_verification_of_a_buffer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The buffer's findings and the runs that judge its fixes read the project's
    `<role>-names`: `feed` is a loader, so AGF011 fires and the runs bind it as one."""
    from autograd_fix.cli.config import ConfigCache
    from autograd_fix.cli.lsp_analysis import settings_for
    from test_config_reach import FEED_TRAINING

    (tmp_path / "pyproject.toml").write_text('[tool.autograd-fix]\nloader-names = ["feed"]\n')
    path = tmp_path / "fit.py"
    settings = settings_for(path, tmp_path, ConfigCache())
    pairs: list[dict] = []

    def stub(next_pair, on_verdict, **kwargs):
        while (item := next_pair()) is not None:
            key, pair = item
            pairs.append(pair)
            on_verdict(key, Verdict("accepted", "stubbed", pair.get("rule"), ()))

    monkeypatch.setattr(verification.api, "verify_stream", stub)
    analysis = analyse(FEED_TRAINING, 1, str(path), settings)
    report = verify_document(source_bytes(FEED_TRAINING), analysis, VerifySettings(), lambda: object())
    assert [(v["code"], v["applied"]) for v in report.verdicts] == [("AGF011", True)]
    (pair,) = pairs
    assert pair["roles"] == {"names": {"loader": ["feed"]}, "objects": {}}
