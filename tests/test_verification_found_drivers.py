"""Drivers found in the project (issue 17, item 2).

A changed `Trainer.run` in a package module has no `__main__`; its project has a
`train.py` that imports the trainer and runs it, a console entry point and a test. They
are found statically and tried before synthesized inputs (which cannot bind `config`),
and the verdict names the one that ran.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from autograd_fix.codemods.registry import rule_by_code
from autograd_fix.verification import verify_pair
from autograd_fix.verification.found_drivers import find_drivers

AGF002 = tuple(rule_by_code("AGF002").contract.checks)

# a package module as Lightning-style projects write them: a config object of unknown
# shape, a model built elsewhere, a loop that trains for as long as the config says
TRAINER = """\
import torch
from torch import nn


class Trainer:
    def __init__(self, model, config):
        self.model = model
        self.config = config
        self.optimizer = torch.optim.SGD(model.parameters(), lr=config.lr)

    def run(self):
        generator = torch.Generator().manual_seed(self.config.seed)
        losses = []
        for step in range(self.config.steps):
            x = torch.randn(self.config.batch, 4, generator=generator)
            y = x.sum(1, keepdim=True)
            self.optimizer.zero_grad()
            loss = nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            self.optimizer.step()
            losses.append(loss.item())
        return losses
"""
BUGGY = TRAINER.replace("            self.optimizer.zero_grad()\n", "")
WRONG = BUGGY.replace("            loss.backward()\n", "            loss.backward()\n            self.optimizer.zero_grad()\n")

TRAIN_SCRIPT = """\
from dataclasses import dataclass

import torch

from toy.trainer import Trainer


@dataclass
class Config:
    lr: float = 0.05
    steps: int = 100000
    batch: int = 16
    seed: int = 3


if __name__ == "__main__":
    model = torch.nn.Linear(4, 1)
    losses = Trainer(model, Config()).run()
    print(f"final loss {losses[-1]:.4f}")
"""

CLI = """\
from toy import Trainer


def main():
    import torch
    from types import SimpleNamespace
    Trainer(torch.nn.Linear(4, 1), SimpleNamespace(lr=0.1, steps=3, batch=4, seed=0)).run()
"""

TEST = """\
import torch
from types import SimpleNamespace

from toy.trainer import Trainer


def test_loss_goes_down():
    config = SimpleNamespace(lr=0.05, steps=20, batch=16, seed=0)
    losses = Trainer(torch.nn.Linear(4, 1), config).run()
    assert losses[-1] < losses[0]


def test_unrelated():
    assert True
"""


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "toy-project"
    files = {
        "pyproject.toml": "[project]\nname = 'toy'\n[project.scripts]\ntoy-train = 'toy.cli:main'\n",
        "toy/__init__.py": "from .trainer import Trainer\n",
        "toy/trainer.py": BUGGY,
        "toy/cli.py": CLI,
        "toy/logging_setup.py": "import logging\nlogger = logging.getLogger('toy')\n",
        "train.py": TRAIN_SCRIPT,
        "tests/test_trainer.py": TEST,
        "notes/unrelated.py": "import trainer_of_something_else\nprint('not ours')\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


def test_scripts_entry_points_and_tests_that_reach_the_function_are_found_in_that_order(tmp_path):
    root = _project(tmp_path)
    found = find_drivers(str(root), str(root / "toy" / "trainer.py"), ["Trainer.run"])
    assert [(c.kind, c.text) for c in found] == [
        ("script", "python train.py"),                            # a __main__ block that imports toy.trainer
        ("entry", "toy-train"),                                   # toy.cli names Trainer through the package
        ("pytest", "tests/test_trainer.py::test_loss_goes_down"),  # not test_unrelated
    ]
    assert found[0].label == "project script `python train.py`"
    # a function nothing in the project names has no driver
    assert find_drivers(str(root), str(root / "toy" / "trainer.py"), ["helper"]) == []


def test_a_library_change_is_verified_through_the_project_script(tmp_path, verifier):
    root = _project(tmp_path)
    path = str(root / "toy" / "trainer.py")
    right = verify_pair(BUGGY, TRAINER, path=path, rule="AGF002", checks=AGF002, verifier=verifier)
    assert right.verdict == "accepted", right.reason
    assert right.driver == "project script `python train.py`"
    # the changed line runs in the first step: the run stops 2 steps later, in the library's loop
    assert "stopped 2 optimizer steps after the changed code ran (at loop `for step` at toy/trainer.py:14)" in right.reason, right.reason
    wrong = verify_pair(BUGGY, WRONG, path=path, rule="AGF002", checks=AGF002, verifier=verifier)
    assert wrong.verdict == "rejected", wrong.reason
    assert wrong.driver == "project script `python train.py`"
