"""Library inputs bound from how the project's own code calls the function (issue 17,
item 6, class 7).

A changed `train_step(model, batch, optimizer, history)` in a package module takes a
batch that is a dict of named tensors and a model class the module does not define: a
name or a role cannot say what they are, and no project script runs the step (the
caller is a library `fit` function). The project's own call in `toy/fit.py` builds
every argument a few lines above it; they are rebuilt from there.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from autograd_fix.codemods.registry import rule_by_code
from autograd_fix.verification import verify_pair
from autograd_fix.verification.call_sites import find_call_site

AGF006 = tuple(rule_by_code("AGF006").contract.checks)

ENGINE = """\
import torch.nn.functional as F


def train_step(model, batch, optimizer, history, clip=None):
    optimizer.zero_grad()
    logits = model(batch["image"])
    loss = F.cross_entropy(logits, batch["label"])
    loss.backward()
    optimizer.step()
    history.append(loss.item())
    return sum(history) / len(history)
"""
BUGGY = ENGINE.replace("history.append(loss.item())", "history.append(loss)")
WRONG = ENGINE.replace("history.append(loss.item())", "history.append(loss.item() / len(batch))")

FIT = """\
import torch
from torch import nn

from toy.engine import train_step

CLASSES = 5


class TinyNet(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.head = nn.Linear(4 * 8 * 8, classes)

    def forward(self, x):
        return self.head(torch.relu(self.conv(x)).flatten(1))


def make_batches(count):
    generator = torch.Generator().manual_seed(0)
    return [{"image": torch.randn(6, 3, 8, 8, generator=generator),
             "label": torch.randint(0, CLASSES, (6,), generator=generator)} for _ in range(count)]


def fit(epochs):
    model = TinyNet(CLASSES)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    history = []
    batches = make_batches(4)
    for epoch in range(epochs):
        for batch in batches:
            train_step(model, batch, optimizer, history)
    return history
"""


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "toy-project"
    for name, text in {
        "pyproject.toml": "[project]\nname = 'toy'\n",
        "toy/__init__.py": "",
        "toy/engine.py": BUGGY,
        "toy/fit.py": FIT,
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


def test_the_call_site_gives_each_argument_and_the_statements_that_build_it(tmp_path):
    root = _project(tmp_path)
    site = find_call_site(str(root), str(root / "toy" / "engine.py"), "train_step")
    assert site is not None
    assert site.where == "toy/fit.py:32"
    assert site.arguments == {"model": "model", "batch": "batch", "optimizer": "optimizer", "history": "history"}
    program = site.program.splitlines()
    # what the arguments need, in source order: imports, the constant, the definitions the
    # recipe names, the assignments before the call, the loop's first item
    assert program[:2] == ["import torch", "from torch import nn"]
    assert "batch = next(iter(batches))" in program
    assert any(line.startswith("class TinyNet(nn.Module):") for line in program)
    assert "CLASSES = 5" in program
    # the changed module's own import is not part of any recipe
    assert not any("train_step" in line for line in program)
    # a function nobody calls has no call site
    assert find_call_site(str(root), str(root / "toy" / "engine.py"), "evaluate") is None


def test_a_library_function_is_verified_with_the_inputs_its_caller_builds(tmp_path, verifier):
    root = _project(tmp_path)
    path = str(root / "toy" / "engine.py")
    right = verify_pair(BUGGY, ENGINE, path=path, rule="AGF006", checks=AGF006, verifier=verifier)
    assert right.verdict == "accepted", right.reason
    assert right.driver.startswith("function train_step with inputs from its call at toy/fit.py:32 (model, batch, optimizer, history)"), right.driver
    bound = right.units[0].evidence["original"]["bound"]
    assert bound["batch"] == "`batch` from the call at toy/fit.py:32: {'image': tensor [6, 3, 8, 8], 'label': tensor [6]}"
    assert bound["model"].endswith("TinyNet()")
    wrong = verify_pair(BUGGY, WRONG, path=path, rule="AGF006", checks=AGF006, verifier=verifier)
    assert wrong.verdict == "rejected", wrong.reason
    assert "accumulated values differ: return" in wrong.reason
