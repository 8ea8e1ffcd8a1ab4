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


def _write(root: Path, files: dict[str, str]) -> Path:
    """A project `root` with package `toy` and `files` (path -> text)."""
    for name, text in {"pyproject.toml": "[project]\nname = 'toy'\n", "toy/__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


def _project(tmp_path: Path) -> Path:
    return _write(tmp_path / "toy-project", {"toy/engine.py": BUGGY, "toy/fit.py": FIT})


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


# -- a method: `self` from the instance the project's own caller builds ------------------

TRAINER = """\
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class TrainConfig:
    lr: float
    batch_size: int


class Trainer:
    def __init__(self, config, model, dataset):
        self.config = config
        self.model = model
        self.inputs, self.labels = dataset
        self.optimizer = torch.optim.SGD(model.parameters(), lr=config.lr)
        self.losses = []

    def train_epoch(self, epoch):
        for start in range(0, len(self.inputs), self.config.batch_size):
            x = self.inputs[start:start + self.config.batch_size]
            y = self.labels[start:start + self.config.batch_size]
            self.optimizer.zero_grad()
            loss = F.cross_entropy(self.model(x), y)
            loss.backward()
            self.optimizer.step()
            self.losses.append(loss.item())
        return sum(self.losses) / len(self.losses)
"""
TRAINER_BUGGY = TRAINER.replace("self.losses.append(loss.item())", "self.losses.append(loss)")
TRAINER_WRONG = TRAINER.replace("self.losses.append(loss.item())", "self.losses.append(loss.item() / self.config.batch_size)")

# `main()` is never called at import and the file has no `__main__` block: no project
# driver runs the trainer, only this call says what `config`, `model` and `dataset` are
TRAIN = """\
import torch
from torch import nn

from toy.trainer import TrainConfig, Trainer


class TinyNet(nn.Module):
    def __init__(self, features, classes):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 16), nn.ReLU(), nn.Linear(16, classes))

    def forward(self, x):
        return self.body(x)


def make_dataset(count):
    generator = torch.Generator().manual_seed(0)
    return torch.randn(count, 10, generator=generator), torch.randint(0, 3, (count,), generator=generator)


def main():
    config = TrainConfig(lr=0.05, batch_size=4)
    model = TinyNet(10, 3)
    dataset = make_dataset(16)
    trainer = Trainer(config, model, dataset)
    for epoch in range(3):
        print(f"epoch {epoch}: {trainer.train_epoch(epoch):.3f}")
"""


def _trainer_project(tmp_path: Path, train: str = TRAIN) -> Path:
    return _write(tmp_path / "trainer-project", {"toy/trainer.py": TRAINER_BUGGY, "train.py": train})


def test_a_method_call_site_gives_self_from_the_construction_before_it(tmp_path):
    root = _trainer_project(tmp_path)
    path = str(root / "toy" / "trainer.py")
    site = find_call_site(str(root), path, "Trainer.train_epoch")
    assert site is not None
    assert site.where == "train.py:27"
    assert site.arguments == {"self": "trainer", "epoch": "epoch"}
    program = site.program.splitlines()
    # self's recipe: the construction and what it reads, the class imported as the caller does
    assert "from toy.trainer import TrainConfig, Trainer" in program
    assert "trainer = Trainer(config, model, dataset)" in program
    assert "config = TrainConfig(lr=0.05, batch_size=4)" in program
    assert "epoch = next(iter(range(3)))" in program
    # `import pkg.mod as m; m.Class(...)` is an import of the class too
    aliased = TRAIN.replace("from toy.trainer import TrainConfig, Trainer", "import toy.trainer as tr").replace(
        "TrainConfig(", "tr.TrainConfig(").replace("Trainer(config", "tr.Trainer(config")
    root2 = _trainer_project(tmp_path / "aliased", aliased)
    site2 = find_call_site(str(root2), str(root2 / "toy" / "trainer.py"), "Trainer.train_epoch")
    assert site2 is not None and site2.arguments["self"] == "trainer"
    assert "import toy.trainer as tr" in site2.program.splitlines()
    # an instance kept on another object is not rebuilt alone; a method nobody calls has no site
    held = TRAIN.replace("trainer = Trainer(config, model, dataset)",
                         "holder = types.SimpleNamespace()\n    holder.trainer = Trainer(config, model, dataset)").replace(
        "trainer.train_epoch", "holder.trainer.train_epoch")
    root3 = _trainer_project(tmp_path / "held", held)
    assert find_call_site(str(root3), str(root3 / "toy" / "trainer.py"), "Trainer.train_epoch") is None
    assert find_call_site(str(root), path, "Trainer.evaluate") is None


def test_a_method_is_verified_on_the_instance_its_caller_builds(tmp_path, verifier):
    root = _trainer_project(tmp_path)
    path = str(root / "toy" / "trainer.py")
    right = verify_pair(TRAINER_BUGGY, TRAINER, path=path, rule="AGF006", checks=AGF006, verifier=verifier)
    assert right.verdict == "accepted", right.reason
    assert right.driver.startswith(
        "method Trainer.train_epoch with self and inputs from its call at train.py:27 (self, epoch)"), right.driver
    bound = right.units[0].evidence["original"]["bound"]
    assert bound["self"] == "`trainer` from the call at train.py:27: Trainer", bound
    assert bound["epoch"].startswith("`epoch` from the call at train.py:27"), bound
    wrong = verify_pair(TRAINER_BUGGY, TRAINER_WRONG, path=path, rule="AGF006", checks=AGF006, verifier=verifier)
    assert wrong.verdict == "rejected", wrong.reason
    assert "differ" in wrong.reason, wrong.reason


def test_a_class_its_package_re_exports_runs_each_sides_own_method(tmp_path, verifier):
    # `from toy import Trainer` through `toy/__init__.py`: importing the package runs the
    # project's copy of trainer.py first, so the recipe's instance is of that copy's
    # class; each side must still run (and the line watch see) its own method
    root = _trainer_project(tmp_path, TRAIN.replace("from toy.trainer import", "from toy import"))
    (root / "toy" / "__init__.py").write_text("from .trainer import TrainConfig, Trainer\n")
    path = str(root / "toy" / "trainer.py")
    right = verify_pair(TRAINER_BUGGY, TRAINER, path=path, rule="AGF006", checks=AGF006, verifier=verifier)
    assert right.verdict == "accepted", right.reason
    assert right.driver.startswith("method Trainer.train_epoch with self and inputs from its call at train.py:27"), right.driver
    wrong = verify_pair(TRAINER_BUGGY, TRAINER_WRONG, path=path, rule="AGF006", checks=AGF006, verifier=verifier)
    assert wrong.verdict == "rejected", wrong.reason
