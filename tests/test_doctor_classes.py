"""`autograd-fix doctor`: the classes of bugs the recall benchmark (benchmarks/doctor_recall.py)
found missed or misplaced, each with a look-alike that is right. Each case is one short
run in the sandbox; the expected findings are the `# <- CODE` markers."""

from __future__ import annotations

import re
import xml.dom.minidom
from pathlib import Path

import pytest

from autograd_fix.cli.doctor_plot import BARS, runs, sparkline, svg, terminal_chart
from autograd_fix.verification.doctor.diagnose import diagnose

MODEL = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.CrossEntropyLoss()
data = [(torch.randn(4, 8), torch.randint(0, 2, (4,))) for _ in range(8)]
"""

HAND_SGD = """\
import torch

torch.manual_seed(0)
x, y = torch.randn(16, 10), torch.randn(16, 3)
w1 = torch.randn(10, 12, requires_grad=True)
w2 = torch.randn(12, 3, requires_grad=True)
for t in range(20):
    loss = (x.mm(w1).clamp(min=0).mm(w2) - y).pow(2).sum()
    loss.backward()
    with torch.no_grad():
        w1 -= 1e-3 * w1.grad  # <- AGF002
        w2 -= 1e-3 * w2.grad
"""

GAN = """\
import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
D = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1), nn.Sigmoid())
opt_G = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_D = torch.optim.Adam(D.parameters(), lr=1e-3)
for step in range(4):
    real = torch.randn(5, 8) + 2
    fake = G(torch.randn(5, 4))
    g_loss = torch.log(1.0 - D(fake)).mean()
    opt_G.zero_grad()
    g_loss.backward()
    opt_G.step()
    d_loss = -(torch.log(D(real)) + torch.log(1.0 - D(fake))).mean()  # d
    opt_D.zero_grad()
    d_loss.backward()
    opt_D.step()
"""

GAN_RETAINED = """\
import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
D = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1), nn.Sigmoid())
opt_G = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_D = torch.optim.Adam(D.parameters(), lr=1e-3)
for step in range(4):
    fake = G(torch.randn(5, 4))
    d_loss = -(torch.log(D(torch.randn(5, 8) + 2)) + torch.log(1.0 - D(fake))).mean()
    opt_D.zero_grad()
    d_loss.backward(retain_graph=True)
    opt_D.step()
    g_loss = -torch.log(D(fake)).mean()
    opt_G.zero_grad()
    g_loss.backward()
    opt_G.step()
"""

CASES = {
    # hand-written SGD: .grad never reset between updates; AGF002 at the first update
    "hand_sgd": HAND_SGD,
    "hand_sgd_near_miss_reset": HAND_SGD.replace("  # <- AGF002", "") + "        w1.grad = None\n        w2.grad = None\n",
    # p.data.add_ does not even bump the parameter's version
    "hand_sgd_data_add": MODEL + """
for x, y in data:
    loss = criterion(model(x), y)
    loss.backward()
    for param in model.parameters():
        param.data.add_(-0.1 * param.grad)  # <- AGF002
""",
    # accumulation every 2 batches, the loop shortened to 3: the run stops before step 2
    "accumulation_cut_before_next_step": MODEL + """
for i, (x, y) in enumerate(data):
    loss = criterion(model(x), y) / 2
    loss.backward()
    if (i + 1) % 2 == 0:
        optimizer.step()  # <- AGF002
""",
    "accumulation_near_miss_zeroed": MODEL + """
for i, (x, y) in enumerate(data):
    loss = criterion(model(x), y) / 2
    loss.backward()
    if (i + 1) % 2 == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
    # a module made with inplace=True changes a saved tensor: the flag is the bug
    "inplace_module": """\
import torch
from torch import nn

torch.manual_seed(0)


class Unit(nn.Module):
    def __init__(self):
        super().__init__()
        self.skip = nn.Linear(6, 6)
        self.act = nn.ReLU(inplace=True)  # <- AGF003
        self.body = nn.Linear(6, 6)

    def forward(self, x):
        skip = self.skip(x)  # saves x for its weight's gradient
        x = self.act(x)
        return self.body(x) + skip


model = nn.Sequential(nn.Linear(4, 6), Unit())
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    optimizer.zero_grad()
    model(torch.randn(5, 4)).pow(2).mean().backward()
    optimizer.step()
""",
    # a copy of the softmax has no graph: the backward crashes, the copy is the bug
    "copy_cut_crash": MODEL + """
import torch.nn.functional as F


def soft_loss(logits, y):
    probs = torch.tensor(F.softmax(logits, dim=1))  # <- AGF008
    return -probs.gather(1, y[:, None]).log().mean()


for x, y in data:
    optimizer.zero_grad()
    soft_loss(model(x), y).backward()
    optimizer.step()
""",
    # the cut hidden by making the loss require grad
    "loss_requires_grad_rewrap": MODEL + """
for x, y in data:
    optimizer.zero_grad()
    loss = criterion(model(x).detach(), y)
    loss.requires_grad = True  # <- AGF008
    loss.backward()
    optimizer.step()
""",
    # reentrant checkpoint of a stage whose input does not require grad
    "reentrant_checkpoint": MODEL + """
from torch.utils.checkpoint import checkpoint

stage = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
optimizer = torch.optim.SGD([*stage.parameters(), *model.parameters()], lr=0.1)
for x, y in data:
    optimizer.zero_grad()
    hidden = checkpoint(stage, x, use_reentrant=True)  # <- AGF014
    criterion(model(hidden), y).backward()
    optimizer.step()
""",
    "reentrant_checkpoint_near_miss": MODEL + """
from torch.utils.checkpoint import checkpoint

stage = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
optimizer = torch.optim.SGD([*stage.parameters(), *model.parameters()], lr=0.1)
for x, y in data:
    optimizer.zero_grad()
    hidden = checkpoint(stage, x, use_reentrant=False)
    criterion(model(hidden), y).backward()
    optimizer.step()
""",
    # `require_grad` freezes nothing
    "require_grad_typo": MODEL + """
for param in model[0].parameters():
    param.require_grad = False  # <- AGF013
for x, y in data:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
""",
    "require_grad_near_miss": MODEL + """
for param in model[0].parameters():
    param.requires_grad = False
for x, y in data:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
""",
    # a quantizer's straight-through backward disagrees with finite differences by design
    "straight_through_near_miss": MODEL + """
class Quantize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        return torch.round(x * scale) / scale

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


for x, y in data:
    optimizer.zero_grad()
    criterion(Quantize.apply(model(x), 4.0), y).backward()
    optimizer.step()
""",
    # micro-batches of one backward line summed into each step, the mean loss not divided
    "accumulation_unscaled": MODEL + """
accumulation_steps = 2
for i, (x, y) in enumerate(data):
    loss = criterion(model(x), y)
    loss.backward()  # <- AGF019
    if (i + 1) % accumulation_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
    "accumulation_scaled_near_miss": MODEL + """
accumulation_steps = 2
for i, (x, y) in enumerate(data):
    loss = criterion(model(x), y) / accumulation_steps
    loss.backward()
    if (i + 1) % accumulation_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
    # the gradients divided in place before the step: the same mean
    "accumulation_grads_divided_near_miss": MODEL + """
for i, (x, y) in enumerate(data):
    criterion(model(x), y).backward()
    if (i + 1) % 2 == 0:
        for p in model.parameters():
            p.grad.div_(2)
        optimizer.step()
        optimizer.zero_grad()
""",
    # two terms of one loss backpropagated apart (a GAN discriminator's real and fake)
    "two_backward_lines_near_miss": MODEL + """
for x, y in data:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    criterion(model(-x), y).backward()
    optimizer.step()
""",
    # a running loss reset every 2 steps: it never holds 3 iterations, yet grows
    "running_loss_short_window": MODEL + """
running = 0
for i, (x, y) in enumerate(data):
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    running += loss  # <- AGF006
    loss.backward()
    optimizer.step()
    if i % 2 == 1:
        print(float(running) / 2)
        running = 0
""",
    "last_loss_kept_near_miss": MODEL + """
last = None
for x, y in data:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    last = loss * 1.0
print(float(last))
""",
    # a tracker object of the project's own class keeps the losses with their graphs
    "tracker_object_attribute": MODEL + """
class Tracker:
    def __init__(self):
        self.totals = {"loss": 0}

    def update(self, losses):
        for key in losses:
            self.totals[key] += losses[key]  # <- AGF006

    def reset(self):
        for key in self.totals:
            self.totals[key] = 0


tracker = Tracker()
for x, y in data:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    tracker.update({"loss": loss})
""",
    # the step made by a container of optimizers: named where the training code calls it
    "step_through_a_container": MODEL + """
class Optimizers:
    def __init__(self, *optimizers):
        self.optimizers = optimizers

    def step(self):
        for o in self.optimizers:
            o.step()


both = Optimizers(optimizer)


def train_step(x, y):
    criterion(model(x), y).backward()
    both.step()  # <- AGF002


for x, y in data:
    train_step(x, y)
""",
    # an in-place layer inside an nn.Sequential changes what the ReLU saved
    "inplace_layer_in_sequential": """\
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Dropout(0.5, inplace=True), nn.Linear(6, 1))  # <- AGF003
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(3):
    optimizer.zero_grad()
    net(torch.randn(5, 4)).pow(2).mean().backward()
    optimizer.step()
""",
    # a backward that returns one gradient for two inputs: named at that return
    "gradient_count_at_the_return": MODEL + """
class Noisy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, training=True):
        return x + 0.01 * torch.randn_like(x) if training else x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output  # <- AGF004


for x, y in data:
    optimizer.zero_grad()
    criterion(Noisy.apply(model(x), True), y).backward()
    optimizer.step()
""",
    # a helper that hands the model's output to an evaluation function only
    "helper_of_an_evaluation_function": MODEL + """
def _forward(batch):
    return model(batch)


def validate(batches):  # <- AGF001
    total = 0.0
    for x, y in batches:
        total += criterion(_forward(x), y).item()
    return total


for x, y in data:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
print(validate(data[:2]))
""",
    # a GAN's discriminator step reuses the generator's output after the generator's
    # step: the backward meets a freed graph whose parameters changed (AGF003, not a state
    # carried across iterations)
    "output_reused_after_its_step": GAN.replace("  # d\n", "  # <- AGF003\n"),
    # the same with the generator's graph retained: the backward meets G's weights
    # changed in place by its step; named at the same forward, not at the loss
    "output_reused_after_its_step_retained": GAN.replace("  # d\n", "  # <- AGF003\n").replace(
        "g_loss.backward()", "g_loss.backward(retain_graph=True)"),
    # the fake's graph is retained and only the discriminator stepped: a legitimate reuse;
    # D's gradients from the generator's loss, cut off by the stop, are zeroed at the
    # start of each iteration, as the run saw
    "output_reused_near_miss_other_step": GAN_RETAINED,
    # an epoch's sum returned and dropped: only the end of the batch loop sees it hold
    # two iterations
    "sum_held_to_the_end_of_its_loop": MODEL + """
def train_epoch(batches):
    total = 0
    for x, y in batches:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss  # <- AGF006
    return total / len(batches)


for epoch in range(3):
    print(float(train_epoch(data[:2])))
""",
    # evaluation losses kept per epoch: the list holds graphs no backward went through,
    # made by passes of two iterations, seen when the epoch loop ends
    "evaluation_graphs_kept_per_epoch": MODEL + """
def epoch():
    for x, y in data[:2]:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    val_loss = criterion(model(data[2][0]), data[2][1])  # <- AGF001
    return val_loss


def main():
    history = []
    for _ in range(4):
        history.append(epoch())  # <- AGF006
    print([round(float(v), 3) for v in history])


main()
""",
    # a forward that raises (the run's memory limit, say): its graph died with the error,
    # not for want of a backward
    "forward_that_raises_near_miss": """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x, step):
        h = torch.tanh(self.fc(x))
        if step == 2:
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory")
        return h


net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    net(torch.randn(4, 8), step).sum().backward()
    opt.step()
""",
    # a loss summed over micro-batches, one backward per epoch: one iteration held
    "sum_near_miss_one_backward_per_epoch": MODEL + """
def main():
    for epoch in range(3):
        optimizer.zero_grad()
        total = 0
        for x, y in data[:2]:
            total = total + criterion(model(x), y)
        total.backward()
        optimizer.step()
    print(float(total))


main()
""",
}


def expected(source: str) -> set[tuple[str, int]]:
    return {(m.group(1), number) for number, line in enumerate(source.splitlines(), 1) if (m := re.search(r"# <- (AGF\d{3})", line))}


@pytest.mark.parametrize("case", sorted(CASES))
def test_class(case: str, tmp_path: Path, verifier) -> None:
    source = CASES[case]
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "train.py").write_text(source)
    diagnosis = diagnose(str(tmp_path / "train.py"), source, timeout=60, verifier=verifier)
    assert diagnosis.status in ("finished", "crashed"), diagnosis.detail
    assert {(f.code, f.line) for f in diagnosis.findings} == expected(source), [f.to_json() for f in diagnosis.findings]


def test_series_shows_the_graph_a_list_keeps(tmp_path: Path, verifier) -> None:
    """The per-backward series: saved bytes grow while a list keeps every validation
    pass's graph, and stay flat for the same loop under no_grad."""
    leak = MODEL + """
x_val, y_val = torch.randn(64, 8), torch.randint(0, 2, (64,))
kept = []
for x, y in data:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
    kept.append(criterion(model(x_val), y_val))
"""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    series = {}
    for name, source in (("leak", leak), ("fixed", leak.replace("kept.append(", "with torch.no_grad():\n        kept.append("))):
        (tmp_path / "train.py").write_text(source)
        series[name] = diagnose(str(tmp_path / "train.py"), source, timeout=60, verifier=verifier).measures["series"]
    grown = [p["saved_bytes"] for p in series["leak"] if not p["end"]]
    flat = [p["saved_bytes"] for p in series["fixed"] if not p["end"]]
    assert len(grown) == 3 and grown[0] < grown[1] < grown[2]  # the loop is capped at 3 iterations
    assert len(set(flat)) == 1 and flat[0] < grown[-1]
    assert series["leak"][-1]["end"] == 1 and series["leak"][-1]["saved_bytes"] > series["fixed"][-1]["saved_bytes"] == 0


def test_picture_and_chart() -> None:
    """The SVG is a well-formed document with one line per run and panel; the chart puts
    the runs of a panel on one scale."""
    before = [{"saved_bytes": n * 1000, "nodes": 10 * n, "end": 0} for n in range(1, 6)]
    after = [{"saved_bytes": 1000, "nodes": 10, "end": 0} for _ in range(5)]
    drawn = runs(before, after)
    document = xml.dom.minidom.parseString(svg(drawn, "train.py <x>"))
    assert len(document.getElementsByTagName("polyline")) == 4
    assert "train.py <x>" in svg(drawn, "train.py <x>").replace("&lt;", "<").replace("&gt;", ">")
    chart = terminal_chart(drawn)
    assert chart[1].split()[2] == "▂▄▅▇█" and chart[2].split()[3] == "▂▂▂▂▂"
    assert sparkline([0, 0]) == BARS[0] * 2 and len(sparkline(list(range(500)))) == 48
    assert runs([], None) == []


# -- a library file, run through the project's script; a notebook ------------------------

TRAINER = """\
import torch


class Trainer:
    def __init__(self, model, data):
        self.model, self.data = model, data
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def run(self):
        for x, y in self.data:
            loss = torch.nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            self.optimizer.step()  # <- AGF002
"""

DRIVER = """\
import torch
from pkg.trainer import Trainer

torch.manual_seed(0)
data = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(6)]
Trainer(torch.nn.Linear(3, 1), data).run()
"""


def test_a_library_file_runs_through_its_projects_script(tmp_path: Path, verifier) -> None:
    """`doctor pkg/trainer.py` (a module that only defines a class) runs the project's
    script that imports and uses it, and reports the bug in the library file; a library
    file no script uses is unavailable, with the reason."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "trainer.py").write_text(TRAINER)
    (tmp_path / "train.py").write_text(DRIVER)
    diagnosis = diagnose(str(tmp_path / "pkg" / "trainer.py"), TRAINER, timeout=60, verifier=verifier)
    assert diagnosis.script == "train.py" and "drives pkg/trainer.py" in diagnosis.via, diagnosis.detail
    assert {(f.path, f.code, f.line) for f in diagnosis.findings} == {("pkg/trainer.py", code, line) for code, line in expected(TRAINER)}
    named = diagnose(str(tmp_path / "pkg" / "trainer.py"), TRAINER, timeout=60, verifier=verifier, driver=str(tmp_path / "train.py"))
    assert named.via.startswith("--driver") and [f.code for f in named.findings] == ["AGF002"]
    (tmp_path / "train.py").unlink()
    alone = diagnose(str(tmp_path / "pkg" / "trainer.py"), TRAINER, timeout=60, verifier=verifier)
    assert alone.status == "unavailable" and "--driver" in alone.detail and not alone.findings


@pytest.mark.torch
def test_a_notebook_is_run_as_its_cells(tmp_path: Path) -> None:
    """`doctor train.ipynb`: the code cells run as one program (IPython lines masked);
    findings are placed as `cell N:line`."""
    import json
    import subprocess
    import sys

    cells = [MODEL, "%matplotlib inline\nfor x, y in data:\n    criterion(model(x), y).backward()\n    optimizer.step()\n"]
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "source": c.splitlines(True), "outputs": [], "execution_count": None}
                          for c in cells],
                "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "train.ipynb").write_text(json.dumps(notebook))
    result = subprocess.run([sys.executable, "-m", "autograd_fix", "doctor", "train.ipynb"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "train.ipynb:cell 2:4 AGF002" in result.stdout, result.stdout
