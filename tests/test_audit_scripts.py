"""The real-repository audit's own tools: the snapshot extraction of
benchmarks/audit_real_code.py and the hand search of benchmarks/recall_search.py.

The recall search is the yardstick the tool's misses are measured with, so it must find
the buggy shapes and leave their corrected twins alone; the extraction must give the
tree a bare snapshot holds, with a `.git` marker, even when a blob is missing.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name: str, monkeypatch):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def codes(recall, tmp_path: Path, source: str) -> list[str]:
    (tmp_path / "train.py").write_text(textwrap.dedent(source))
    return sorted(code for _, _, code, _ in recall.search([tmp_path]))


TRAIN_LOOP = """
    import torch
    for epoch in range(epochs):
        epoch_loss = 0
        for data, label in train_loader:
            output = model(data)
            loss = criterion(output, label)
            {zero}
            loss.backward()
            optimizer.step()
            epoch_loss += {accumulated} / len(train_loader)
"""


def test_recall_finds_missing_zero_grad_and_accumulated_loss(tmp_path, monkeypatch):
    recall = load("recall_search", monkeypatch)
    buggy = codes(recall, tmp_path, TRAIN_LOOP.format(zero="", accumulated="loss"))
    assert buggy.count("AGF002") >= 1 and "AGF006" in buggy


def test_recall_leaves_the_corrected_loop_alone(tmp_path, monkeypatch):
    recall = load("recall_search", monkeypatch)
    fixed = codes(recall, tmp_path, TRAIN_LOOP.format(zero="optimizer.zero_grad()", accumulated="loss.item()"))
    assert "AGF002" not in fixed and "AGF006" not in fixed


VALIDATE = """
    import torch
    def validate(model, valid_dl, loss_fn):
        losses = 0
        model.eval()
        for src, tgt in valid_dl:
            logits = model(src)
            losses += loss_fn(logits, tgt).item()
        return losses
"""


def test_recall_finds_an_evaluation_pass_with_grad_on(tmp_path, monkeypatch):
    recall = load("recall_search", monkeypatch)
    assert "AGF001" in codes(recall, tmp_path, VALIDATE)


def test_recall_leaves_an_evaluation_pass_under_no_grad_alone(tmp_path, monkeypatch):
    recall = load("recall_search", monkeypatch)
    guarded = VALIDATE.replace("    def validate", "    @torch.no_grad()\n    def validate")
    assert "AGF001" not in codes(recall, tmp_path, guarded)


def test_recall_searches_notebook_code_cells(tmp_path, monkeypatch):
    recall = load("recall_search", monkeypatch)
    source = textwrap.dedent(TRAIN_LOOP.format(zero="optimizer.zero_grad()", accumulated="loss")).splitlines(True)
    cells = [{"cell_type": "code", "source": ["!pip -q install vit_pytorch\n"]}, {"cell_type": "code", "source": source}]
    (tmp_path / "demo.ipynb").write_text(json.dumps({"cells": cells, "nbformat": 4}))
    assert [c[2] for c in recall.search([tmp_path])] == ["AGF006"]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_extract_head_writes_the_tree_and_a_git_marker(tmp_path, monkeypatch):
    audit = load("audit_real_code", monkeypatch)
    work = tmp_path / "work"
    (work / "pkg").mkdir(parents=True)
    (work / "pkg" / "train.py").write_text("import torch\n")
    (work / ".gitignore").write_text("data/\n")
    git = ["git", "-C", str(work), "-c", "user.name=a", "-c", "user.email=a@b"]
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    target = tmp_path / "out"
    commit, written, skipped = audit.extract_head(bare, target)
    assert len(commit) == 40 and (written, skipped) == (2, 0)
    assert (target / "pkg" / "train.py").read_text() == "import torch\n"
    assert (target / ".git").is_dir() and (target / ".gitignore").exists()
