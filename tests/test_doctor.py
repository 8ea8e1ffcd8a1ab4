"""`autograd-fix doctor`: bugs found by watching a bounded run of the unmodified script.

Each detector has a bug (found with the right code at the right line, the line marked
``# <- AGFnnn`` in the script) and a near-miss that looks like it (0 findings). Scripts
are small training scripts as people write them; every run goes through the real
sandbox (one warm worker for the module).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograd_fix.verification.doctor.diagnose import diagnose
from autograd_fix.verification.doctor.findings import analyse

PRELUDE = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.CrossEntropyLoss()
data = [(torch.randn(4, 8), torch.randint(0, 2, (4,))) for _ in range(8)]
"""

CASES = {
    # -- AGF001: a forward whose graph no backward uses
    # (an evaluation function: reported at its def, as the static rule reports it)
    "agf001_eval_without_no_grad": PRELUDE + """
def evaluate(batches):  # <- AGF001
    correct = 0
    for x, y in batches:
        out = model(x)
        correct += (out.argmax(1) == y).sum().item()
    return correct

for epoch in range(2):
    for x, y in data:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    print(epoch, evaluate(data[:3]))
""",
    "agf001_near_miss_no_grad": PRELUDE + """
@torch.no_grad()
def evaluate(batches):
    return sum((model(x).argmax(1) == y).sum().item() for x, y in batches)

for epoch in range(2):
    for x, y in data:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    print(epoch, evaluate(data[:3]))
""",
    # -- AGF002: a step that sees gradients of earlier steps
    "agf002_missing_zero_grad": PRELUDE + """
for x, y in data:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()  # <- AGF002
""",
    "agf002_near_miss_accumulation": PRELUDE + """
for i, (x, y) in enumerate(data):
    loss = criterion(model(x), y) / 2
    loss.backward()
    if i % 2 == 1:
        optimizer.step()
        optimizer.zero_grad()
""",
    # -- AGF006: an accumulator that keeps every iteration's graph
    "agf006_total_loss": PRELUDE + """
def train_epoch():
    total_loss = 0
    for x, y in data:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss  # <- AGF006
    return total_loss

print(float(train_epoch()))
""",
    "agf006_near_miss_item": PRELUDE + """
def train_epoch():
    total_loss = 0.0
    for x, y in data:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    return total_loss

print(train_epoch())
""",
    # -- AGF010: a hidden state that carries the previous iteration's graph
    "agf010_hidden_not_detached": """\
import torch
from torch import nn

torch.manual_seed(0)
rnn = nn.RNN(input_size=1, hidden_size=8, batch_first=True)
head = nn.Linear(8, 1)
optimizer = torch.optim.Adam(list(rnn.parameters()) + list(head.parameters()), lr=0.01)
h_state = None
for step in range(5):
    x = torch.randn(1, 10, 1)
    y = torch.sin(x)
    out, h_state = rnn(x, h_state)  # <- AGF010
    loss = nn.functional.mse_loss(head(out), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
    # -- AGF004 and beyond: the seed's SafeCustomOp, whose grad_input misses `param`
    "agf004_safe_custom_op": """\
import torch
from torch import nn


class SafeCustomOp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, param):
        ctx.save_for_backward(input, param)
        return input * param

    @staticmethod
    def backward(ctx, grad_output):
        input, param = ctx.saved_tensors
        grad_input = grad_output.clone()
        grad_param = (grad_output * input).sum(0)
        return grad_input, grad_param  # <- AGF004


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.param = nn.Parameter(torch.full((4,), 3.0))

    def forward(self, x):
        return SafeCustomOp.apply(self.fc(x), self.param).sum(1)


torch.manual_seed(0)
model = Scaled()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(3):
    optimizer.zero_grad()
    loss = model(torch.randn(5, 4)).pow(2).mean()
    loss.backward()
    optimizer.step()
""",
    # -- AGF003: an in-place change of a tensor autograd saved (the run crashes)
    "agf003_inplace_after_sigmoid": PRELUDE + """
class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        gate = torch.sigmoid(self.fc(x))
        gate += 0.5  # <- AGF003
        return gate

gate = Gate()
opt = torch.optim.SGD(gate.parameters(), lr=0.1)
for x, y in data:
    opt.zero_grad()
    criterion(gate(x), y).backward()
    opt.step()
""",
    # -- AGF008: parameters whose graph is cut before the loss
    "agf008_graph_cut": """\
import torch
from torch import nn


class TwoStage(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(8, 16)
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        z = self.encoder(x)  # <- AGF008
        z = torch.tensor(z.detach().numpy())
        return self.head(z)


torch.manual_seed(0)
model = TwoStage()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(torch.randn(4, 8)), torch.randint(0, 2, (4,)))
    loss.backward()
    optimizer.step()
""",
    "agf008_near_miss_frozen_encoder": """\
import torch
from torch import nn


class TwoStage(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(8, 16).requires_grad_(False)
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        return self.head(self.encoder(x))


torch.manual_seed(0)
model = TwoStage()
optimizer = torch.optim.SGD(model.head.parameters(), lr=0.1)
for step in range(4):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(torch.randn(4, 8)), torch.randint(0, 2, (4,)))
    loss.backward()
    optimizer.step()
""",
    # -- AGF011: retain_graph=True that no later backward uses
    "agf011_retain_unused": PRELUDE + """
for x, y in data:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward(retain_graph=True)  # <- AGF011
    optimizer.step()
""",
    "agf011_near_miss_two_losses": PRELUDE + """
for x, y in data:
    optimizer.zero_grad()
    out = model(x)
    criterion(out, y).backward(retain_graph=True)
    out.pow(2).mean().backward()
    optimizer.step()
""",
}

# AGF006 where the accumulator adds, not on line 1 for a value derived from it
CASES["agf006_mean_of_total"] = PRELUDE + """
for epoch in range(2):
    total_loss = 0
    for x, y in data:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total_loss += loss  # <- AGF006
    mean_loss = total_loss / len(data)
    print(epoch, float(mean_loss))
"""

# AGF001 through a helper that returns the model's output, shared by training and
# evaluation: the evaluation caller's line, not the helper's
CASES["agf001_shared_forward_helper"] = PRELUDE + """

def forward(x):
    return {"logits": model(x)}


def accuracy(batches):  # <- AGF001 (an evaluation function: at its def)
    hits = 0
    for x, y in batches:
        hits += int((forward(x)["logits"].argmax(1) == y).sum())
    return hits


for x, y in data:
    optimizer.zero_grad()
    criterion(forward(x)["logits"], y).backward()
    optimizer.step()
print(accuracy(data[:2]))
"""

# AGF008 at the line that cuts the graph: a loss re-wrapped as a fresh leaf, stage losses
# copied into a new tensor (the errors people silence this way: "does not require grad")
CASES["agf008_loss_rewrapped"] = PRELUDE + """
from torch.autograd import Variable

for x, y in data:
    optimizer.zero_grad()
    out = model(x).detach()
    loss = criterion(out, y)
    loss = Variable(loss, requires_grad=True)  # <- AGF008
    loss.backward()
    optimizer.step()
assert isinstance(loss, Variable)
"""
CASES["agf008_stage_losses_copied"] = PRELUDE + """
heads = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
opt = torch.optim.SGD(list(model.parameters()) + list(heads.parameters()), lr=0.1)
for x, y in data:
    opt.zero_grad()
    out = model(x)
    losses = [criterion(head(out), y) for head in heads]
    loss = torch.tensor(losses, requires_grad=True).sum()  # <- AGF008
    loss.backward()
    opt.step()
"""
#: a leaf made once at set-up and trained, and losses copied for logging only
CASES["agf008_near_miss_leaf_once_and_logging"] = PRELUDE + """
scale = torch.tensor([1.0], requires_grad=True)
opt = torch.optim.SGD(list(model.parameters()) + [scale], lr=0.1)
history = []
for x, y in data:
    opt.zero_grad()
    loss = criterion(model(x) * scale, y)
    loss.backward()
    opt.step()
    history.append(torch.tensor([loss.detach(), scale.detach()[0]]))
"""

# AGF004, gradient counts: the return that gives a gradient too many (PyTorch lets a
# trailing None pass) or too few (the backward then fails), named at the return itself
CASES["agf004_count_extra_none"] = PRELUDE + """

class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x * factor

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.factor, None, None  # <- AGF004


for x, y in data:
    optimizer.zero_grad()
    criterion(Scale.apply(model(x), 0.5), y).backward()
    optimizer.step()
"""
CASES["agf004_count_missing_none"] = CASES["agf004_count_extra_none"].replace(
    "def forward(ctx, x, factor):", "def forward(ctx, x, factor, mode):").replace(
    "return grad_output * ctx.factor, None, None  # <- AGF004", "return grad_output * ctx.factor, None  # <- AGF004").replace(
    "Scale.apply(model(x), 0.5)", "Scale.apply(model(x), 0.5, 'mean')")
CASES["agf004_near_miss_count_right"] = CASES["agf004_count_extra_none"].replace(
    "return grad_output * ctx.factor, None, None  # <- AGF004", "return grad_output * ctx.factor, None")

# near-misses that differ from their bug by one line: the fix a person would write
CASES["agf004_near_miss_right_backward"] = CASES["agf004_safe_custom_op"].replace(
    "grad_input = grad_output.clone()", "grad_input = grad_output * param").replace("  # <- AGF004", "")
CASES["agf003_near_miss_out_of_place"] = CASES["agf003_inplace_after_sigmoid"].replace("gate += 0.5  # <- AGF003", "gate = gate + 0.5")
CASES["agf010_near_miss_detached"] = CASES["agf010_hidden_not_detached"].replace(
    "    out, h_state = rnn(x, h_state)  # <- AGF010\n", "    out, h_state = rnn(x, h_state)\n    h_state = h_state.detach()\n")


def expected(source: str) -> set[tuple[str, int]]:
    return {(m.group(1), number) for number, line in enumerate(source.splitlines(), 1) if (m := re.search(r"# <- (AGF\d{3})", line))}


def _run(tmp_path: Path, verifier, source: str, name: str = "train.py"):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    script = tmp_path / name
    script.write_text(source)
    return diagnose(str(script), source, timeout=60, verifier=verifier)


@pytest.mark.parametrize("case", sorted(CASES))
def test_detector(case: str, tmp_path: Path, verifier) -> None:
    source = CASES[case]
    diagnosis = _run(tmp_path, verifier, source)
    assert diagnosis.status in ("finished", "crashed"), diagnosis.detail
    got = {(f.code, f.line) for f in diagnosis.findings if f.path == "train.py"}
    assert got == expected(source), [f.to_json() for f in diagnosis.findings]
    assert all(f.path == "train.py" for f in diagnosis.findings)


def test_evidence_is_measured(tmp_path: Path, verifier) -> None:
    """Each finding says what the run measured: bytes per unused pass, the optimizer and
    the steps, the holder and how many iterations its graph spans."""
    source = CASES["agf001_eval_without_no_grad"]
    (finding,) = _run(tmp_path, verifier, source).findings
    assert finding.evidence["unused_passes"] == finding.evidence["passes"] == 6  # 3 batches x 2 epochs
    assert finding.evidence["saved_bytes_per_pass"] > 0
    stale = _run(tmp_path, verifier, CASES["agf002_missing_zero_grad"]).findings[0]
    assert stale.evidence["optimizer"] == "SGD#0" and stale.evidence["steps"][0] == 2 and stale.evidence["params"] == 4
    held = _run(tmp_path, verifier, CASES["agf006_total_loss"]).findings[0]
    assert held.evidence["holder"] == "total_loss" and held.evidence["iterations"] >= 2


def test_crash_is_diagnosed_up_to_it(tmp_path: Path, verifier) -> None:
    """A script that dies half way still has what ran before its death diagnosed."""
    source = PRELUDE + """
for i, (x, y) in enumerate(data):
    criterion(model(x), y).backward()
    optimizer.step()  # <- AGF002
    if i == 2:
        raise ValueError("the data loader broke")
"""
    diagnosis = _run(tmp_path, verifier, source)
    assert diagnosis.status == "crashed" and "ValueError" in diagnosis.detail
    assert {(f.code, f.line) for f in diagnosis.findings} == expected(source)


def test_hostile_exit_is_an_outcome(tmp_path: Path, verifier) -> None:
    """A script that leaves with os._exit(0) gives no record: no finding, a status."""
    diagnosis = _run(tmp_path, verifier, PRELUDE + "import os\nos._exit(0)\n")
    assert diagnosis.status == "exited" and not diagnosis.findings


def test_findings_from_a_record_without_running() -> None:
    """`analyse` is a pure function of the record: an unused pass is AGF001 at its site."""
    record = {"observations": {"optimizer_steps": 1, "sites": [
        {"file": "train.py", "line": 7, "passes": 2, "unused": 0, "held": 0, "unused_bytes": []},
        {"file": "train.py", "line": 9, "passes": 2, "unused": 2, "held": 0, "unused_bytes": [1024, 1024]},
    ]}}
    (finding,) = analyse(record, "train.py", lambda path: None)
    assert (finding.code, finding.line, finding.evidence["saved_bytes_per_pass"]) == ("AGF001", 9, 1024)


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograd_fix", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.torch
def test_cli_text_and_json(tmp_path: Path) -> None:
    """`autograd-fix doctor SCRIPT` prints each finding as path:line CODE, and says
    whether the static rules find it too; exit status 1 with findings."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "train.py").write_text(CASES["agf002_missing_zero_grad"])
    result = _cli(["doctor", "train.py"], tmp_path)
    assert result.returncode == 1, result.stderr
    line = CASES["agf002_missing_zero_grad"].splitlines().index("    optimizer.step()  # <- AGF002") + 1
    assert f"train.py:{line} AGF002" in result.stdout
    assert "[static: also found]" in result.stdout
    result = _cli(["doctor", "--format", "json", "train.py"], tmp_path)
    data = json.loads(result.stdout)
    assert data["status"] == "finished"
    assert [(f["code"], f["line"], f["static"]) for f in data["findings"]] == [("AGF002", line, "also found")]


# -- fixes: a run's finding goes to its rule's fix at that site, then verification -----

#: AGF001 where the static rule is silent: no evaluation name, no `.eval()`, the graph is
#: cut by `float()` inside a helper the training loop calls
STATIC_SILENT_AGF001 = PRELUDE + """

def activation_energy(batches):  # <- AGF001 (the fix goes to the forward's statement)
    energy = 0.0
    for x, _ in batches:
        energy += float(model(x).pow(2).mean())
    return energy


for epoch in range(2):
    for x, y in data:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    print(epoch, activation_energy(data[:3]))
"""


@pytest.mark.torch
def test_diff_and_apply_fix_a_site_the_static_rule_missed(tmp_path: Path) -> None:
    """The static AGF001 rule says nothing; the run shows the unused graphs; `--diff`
    shows AGF001's fix at that line, verified and accepted, and writes nothing; `--apply`
    writes it; a second doctor run then finds nothing (exit 0)."""
    from autograd_fix.codemods.engine import check_source
    from autograd_fix.codemods.registry import all_rules

    assert not check_source(STATIC_SILENT_AGF001, all_rules(), path="train.py", compute_fix=False).findings
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    script = tmp_path / "train.py"
    script.write_text(STATIC_SILENT_AGF001)
    ((code, line),) = expected(STATIC_SILENT_AGF001)
    result = _cli(["doctor", "--diff", "train.py"], tmp_path)
    assert result.returncode == 1, result.stderr
    assert f"train.py:{line} {code}" in result.stdout and "[static: missed]" in result.stdout
    assert f"# AGF001 train.py:{line}:1 accepted" in result.stdout
    assert "+        with torch.no_grad():\n+            energy += float(model(x).pow(2).mean())" in result.stdout
    assert script.read_text() == STATIC_SILENT_AGF001  # --diff writes nothing
    result = _cli(["doctor", "--apply", "train.py"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr  # the one finding was fixed
    assert "fixed: accepted" in result.stdout
    assert "with torch.no_grad():\n            energy += float(" in script.read_text()
    result = _cli(["doctor", "train.py"], tmp_path)
    assert (result.returncode, result.stdout.splitlines()[-1]) == (0, "0 findings"), result.stdout


@pytest.mark.torch
def test_a_notebook_site_the_static_rule_missed_gets_its_rules_fix(tmp_path: Path) -> None:
    """The same static-silent AGF001 in a notebook: the run's site (a line of the cells'
    program) goes to the rule's fix builder in the notebook check as for a script;
    `--diff` shows the fix at `cell 2`, verified and accepted, and writes nothing."""
    prelude, rest = STATIC_SILENT_AGF001.split("\n\n\n", 1)
    cells = [prelude + "\n", rest]
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "source": c.splitlines(True), "outputs": [],
                           "execution_count": None} for c in cells],
                "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    path = tmp_path / "train.ipynb"
    path.write_text(json.dumps(notebook))
    before = path.read_text()
    result = _cli(["doctor", "--diff", "train.ipynb"], tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "train.ipynb:cell 2:" in result.stdout and "AGF001" in result.stdout and "[static: missed]" in result.stdout
    assert "no fix offered" not in result.stdout, result.stdout
    assert "accepted" in result.stdout and "torch.no_grad()" in result.stdout, result.stdout
    assert path.read_text() == before  # --diff writes nothing


@pytest.mark.torch
def test_a_finding_no_rule_fixes_is_reported_with_why(tmp_path: Path) -> None:
    """DOC codes have no rule: `--diff --format json` keeps the finding (an autograd
    crash no rule explains), its evidence, no plan and the reason; nothing is verified
    and nothing is shown as a diff."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "train.py").write_text(UNEXPLAINED_CRASH)
    result = _cli(["doctor", "--diff", "--format", "json", "train.py"], tmp_path)
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["diffs"] == {}
    (crash,) = [f for f in data["findings"] if f["code"] == "DOC003"]
    assert "does not require grad" in crash["evidence"]["error"] and crash["static"] == "unknown"
    assert crash["fix"]["plan"] is None and crash["fix"]["reason"] == "no rule fixes this"


#: an autograd error no rule explains: the loss of a constant target backpropagated
UNEXPLAINED_CRASH = PRELUDE + """
for x, y in data:
    optimizer.zero_grad()
    loss = (torch.ones(3) * 2).sum()
    loss.backward()  # <- DOC003
    optimizer.step()
"""


# -- debug leftovers (AGF017) ------------------------------------------------------------

LEFTOVERS = PRELUDE + """
torch.autograd.set_detect_anomaly(True)  # <- AGF017
for x, y in data:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    torch.cuda.empty_cache()  # <- AGF017
"""

#: anomaly mode for the first backward only, and the cache emptied once after training
LEFTOVERS_NEAR_MISS = PRELUDE + """
for i, (x, y) in enumerate(data):
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    with torch.autograd.detect_anomaly(check_nan=True):
        if i == 0:
            loss.backward()
    if i > 0:
        loss.backward()
    optimizer.step()
torch.cuda.empty_cache()
"""


def _leftover_codes(source: str) -> set[tuple[str, int]]:
    return {(m.group(1), number) for number, line in enumerate(source.splitlines(), 1)
            if (m := re.search(r"# <- ((?:AGF|DOC)\d{3})", line))}


def test_debug_leftovers_at_their_lines(tmp_path: Path, verifier) -> None:
    """Anomaly mode on for every backward of the loop is AGF017 at the line that turned
    it on (what the rule's fix removes), not at the backward; an `empty_cache()` in every
    iteration is AGF017 at the call; used once each, neither."""
    diagnosis = _run(tmp_path, verifier, LEFTOVERS)
    assert {(f.code, f.line) for f in diagnosis.findings} == _leftover_codes(LEFTOVERS), [f.to_json() for f in diagnosis.findings]
    anomaly, cache = sorted(diagnosis.findings, key=lambda f: f.line)
    assert anomaly.evidence["passes"] == 3 and cache.evidence["calls"] == 3  # the loop is capped at 3 iterations
    near = _run(tmp_path, verifier, LEFTOVERS_NEAR_MISS)
    assert near.status == "finished" and not near.findings, [f.to_json() for f in near.findings]


def test_anomaly_mode_turned_on_unseen_is_reported_at_the_backward(tmp_path: Path, verifier) -> None:
    """Anomaly mode switched on where the run cannot see it (`torch.set_anomaly_enabled`)
    is DOC001 at the backward: no line to remove is known."""
    source = PRELUDE + """
torch.set_anomaly_enabled(True)
for x, y in data:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()  # <- DOC001
    optimizer.step()
"""
    diagnosis = _run(tmp_path, verifier, source)
    assert {(f.code, f.line) for f in diagnosis.findings} == _leftover_codes(source), [f.to_json() for f in diagnosis.findings]


@pytest.mark.torch
def test_sarif_carries_evidence_and_doc_rules(tmp_path: Path) -> None:
    """`--format sarif`: the main command's log, with DOC rule descriptors, each result's
    measured evidence and static agreement; --exit-zero exits 0 with findings."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "train.py").write_text(LEFTOVERS + UNEXPLAINED_CRASH[len(PRELUDE):])
    result = _cli(["doctor", "--format", "sarif", "--exit-zero", "train.py"], tmp_path)
    assert result.returncode == 0, result.stderr
    (run,) = json.loads(result.stdout)["runs"]
    rules = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    assert {"AGF001", "AGF017", "DOC003"} <= set(rules)
    results = sorted(run["results"], key=lambda r: r["locations"][0]["physicalLocation"]["region"]["startLine"])
    assert [r["ruleId"] for r in results] == ["AGF017", "AGF017", "DOC003"]
    crash = results[-1]
    assert rules[crash["ruleIndex"]] == "DOC003"
    assert results[1]["properties"]["evidence"] == {"calls": 3}
    assert results[0]["locations"][0]["physicalLocation"]["region"]["startLine"] == min(_leftover_codes(LEFTOVERS))[1]
    assert run["properties"]["run"]["status"] == "crashed"


def test_a_run_that_cannot_be_made_exits_2(tmp_path: Path) -> None:
    """Ruff's convention: 2 for errors, whatever --exit-zero says."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "train.py").write_text("import os\nos._exit(0)\n")
    result = _cli(["doctor", "--exit-zero", "train.py"], tmp_path)
    assert result.returncode == 2 and "error: train.py" in result.stderr, (result.stdout, result.stderr)


# -- fixes at a site, without a run --------------------------------------------------------

SITE_SOURCE = """\
import torch
from torch import nn

model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4)
for step in range(3):
    loss = model(x).pow(2).mean()
    loss.backward(retain_graph=True)
    opt.step()
    score = model(x).sum().item()
    if step: print(model(x).sum().item())
    for row in model(x):
        print(row)
    total = total + loss
    history.append(loss * 2)
"""


@pytest.mark.parametrize(("code", "line", "added", "removed"), [
    ("AGF001", 11, ["    with torch.no_grad():", "        score = model(x).sum().item()"], ["    score = model(x).sum().item()"]),
    ("AGF002", 10, ["    opt.zero_grad()"], []),
    ("AGF011", 9, ["    loss.backward()"], ["    loss.backward(retain_graph=True)"]),
    ("AGF006", 15, ["    total = total + loss.detach()"], ["    total = total + loss"]),
    ("AGF006", 16, ["    history.append((loss * 2).detach())"], ["    history.append(loss * 2)"]),
])
def test_rule_fix_at_a_site(code: str, line: int, added: list[str], removed: list[str]) -> None:
    """`Rule.fix_at`: the rule's fix at a line a run named, as a plan that composes."""
    from autograd_fix.codemods.plans import FilePlans
    from autograd_fix.codemods.registry import all_rules

    plans = FilePlans.from_source(SITE_SOURCE, all_rules(), "train.py", sites=((code, line),))
    plan = [p for p in plans.plans if p.code == code][-1]  # the site's own comes after the static findings
    fixed = plans.compose([plan.id], final=True)
    before, after = SITE_SOURCE.splitlines(), fixed.splitlines()
    assert [l for l in after if l not in before] == added and [l for l in before if l not in after] == removed


def test_static_agreement_inside_the_loop_the_static_rule_names() -> None:
    """A run's AGF001 at the forward inside a module-level evaluation loop is the site of
    the static AGF001 on that loop's header (its fix wraps the loop)."""
    from autograd_fix.cli.doctor import static_agreement
    from autograd_fix.verification.doctor.outcome import Finding

    text = "import torch\nfor x in loader:\n    y = 1\n    z = 2\n    out = model(x)\nprint(out)\n"
    assert static_agreement(Finding("AGF001", "t.py", 5, ""), text, [("AGF001", 2)]) is True
    assert static_agreement(Finding("AGF001", "t.py", 6, ""), text, [("AGF001", 2)]) is False
    assert static_agreement(Finding("DOC001", "t.py", 5, ""), text, [("AGF001", 5)]) is None


def test_no_site_fix_on_a_header_or_one_line_suite() -> None:
    """A forward in a `for` header or a one-line `if` suite has no statement of its own
    to wrap: no fix (the finding stays, with AGF001's reason); `# noqa` holds."""
    from autograd_fix.codemods.engine import check_source
    from autograd_fix.codemods.registry import all_rules
    from autograd_fix.codemods.site_fixes import site_fix_reason

    def sites(source: str, line: int) -> list:
        """AGF001 findings the site adds to what the static rules find on their own."""
        def keys(found) -> set:
            return {(f.code, f.span.line, f.message) for f in found.findings if f.code == "AGF001"}

        static = keys(check_source(source, all_rules(), path="t.py", compute_fix=False))
        return sorted(keys(check_source(source, all_rules(), path="t.py", compute_fix=False, sites=(("AGF001", line),))) - static)

    assert not sites(SITE_SOURCE, 12) and not sites(SITE_SOURCE, 13)
    assert "compound statement's header" in site_fix_reason("AGF001", all_rules())
    assert sites(SITE_SOURCE, 11)
    assert not sites(SITE_SOURCE.replace("score = model(x).sum().item()", "score = model(x).sum().item()  # noqa: AGF001"), 11)
