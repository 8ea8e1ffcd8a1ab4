"""The project index (issue 18 item 1, F4): a project's own grad-disabling decorators and
context managers, module classes and factories, followed across files.

The two-file fixture is YOLOv5's shape: `utils/torch_utils.py` defines
`smart_inference_mode()`, a decorator factory returning `torch.inference_mode()(fn)`
behind a conditional, and `val.py` decorates its evaluation loop with it.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from typer.testing import CliRunner

from autograd_fix.cli.app import app
from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.project_index import Kind, ProjectIndex, project_root
from autograd_fix.codemods.registry import select_rules

TORCH_UTILS = """
import torch


def smart_inference_mode(torch_1_9=True):
    # applies torch.inference_mode() if torch>=1.9.0 else torch.no_grad()
    def decorate(fn):
        return (torch.inference_mode if torch_1_9 else torch.no_grad)()(fn)

    return decorate
"""

VAL = """
import torch

from utils.torch_utils import smart_inference_mode


@smart_inference_mode()
def run(model, dataloader):
    model.eval()
    stats = []
    for im, targets in dataloader:
        preds = model(im)
        stats.append(preds)
    return stats
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    return root


def agf001_lines(root: Path, name: str, project: ProjectIndex | None) -> list[int]:
    path = root / name
    result = check_source(
        path.read_text(), select_rules(["AGF001"]), path=str(path), options=FixOptions(project=project), compute_fix=False
    )
    return [finding.span.line for finding in result.findings]


def test_decorator_factory_from_another_file_disables_grad(tmp_path: Path) -> None:
    dotted = "import utils.torch_utils\n\n@utils.torch_utils.smart_inference_mode()\ndef run(model, x):\n    return model(x)\n"
    root = write(tmp_path, {"utils/__init__.py": "", "utils/torch_utils.py": TORCH_UTILS, "val.py": VAL, "detect.py": dotted})
    index = ProjectIndex.build(root)
    assert index.lookup("utils/torch_utils.py", "smart_inference_mode").call is Kind.DISABLER
    assert index.lookup("val.py", "smart_inference_mode").call is Kind.DISABLER
    assert index.lookup("detect.py", "utils.torch_utils.smart_inference_mode").call is Kind.DISABLER
    assert index.view(str(root / "utils" / "__init__.py")) is None  # nothing there means anything
    # without the index the loop looks like an evaluation with grad on (the F4 false finding)
    assert agf001_lines(root, "val.py", None) == [12]
    assert agf001_lines(root, "val.py", index) == []


def test_a_run_parses_only_the_files_grad_mode_questions_reach(tmp_path: Path) -> None:
    """The default build parses the files that mention a grad-mode API, then those that
    mention a name found to disable grad (through a re-export too), not the rest."""
    files = {
        "utils/__init__.py": "from .torch_utils import smart_inference_mode as sim\n",
        "utils/torch_utils.py": TORCH_UTILS,
        "detect.py": "from utils import *\n\n@sim()\ndef run(model, x):\n    return model(x)\n",
        "val.py": VAL,
    }
    files.update({f"models/m{i}.py": "import torch.nn as nn\n\nclass M(nn.Module):\n    pass\n" for i in range(5)})
    index = ProjectIndex.build(write(tmp_path, files))
    assert index.lookup("detect.py", "sim").call is Kind.DISABLER  # re-exported under another name, star-imported
    assert index.lookup("val.py", "smart_inference_mode").call is Kind.DISABLER
    assert index.parsed == 4  # not the five model files
    assert ProjectIndex.build(tmp_path, everything=True).parsed == 9


def test_cli_builds_the_index_once_for_the_run(tmp_path: Path, monkeypatch) -> None:
    root = write(tmp_path, {"utils/__init__.py": "", "utils/torch_utils.py": TORCH_UTILS, "val.py": VAL})
    monkeypatch.chdir(root)
    result = CliRunner().invoke(app, ["--no-verify", "--format", "json", "val.py"], catch_exceptions=False)
    assert json.loads(result.stdout)["findings"] == []


def test_a_decorator_that_does_nothing_to_grad_leaves_the_finding(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "utils/__init__.py": "",
            "utils/torch_utils.py": "def smart_inference_mode():\n    def decorate(fn):\n        return fn\n    return decorate\n",
            "val.py": VAL,
        },
    )
    assert agf001_lines(root, "val.py", ProjectIndex.build(root)) == [12]


def test_context_managers_wrappers_aliases_and_relative_imports(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "pkg/__init__.py": "from .modes import *\n",
            "pkg/modes.py": """
                import contextlib
                import functools
                import torch as T
                from torch import no_grad

                @contextlib.contextmanager
                def evaluating(model):
                    model.eval()
                    with T.no_grad():
                        yield model
                    model.train()

                def no_grad_call(fn):
                    @functools.wraps(fn)
                    def wrapper(*args, **kwargs):
                        with no_grad():
                            return fn(*args, **kwargs)
                    return wrapper

                class frozen(T.no_grad):
                    pass

                inference = T.inference_mode()
                grad_on = T.inference_mode(False)
            """,
            "pkg/eval.py": """
                from . import modes
                from .modes import evaluating, no_grad_call

                @no_grad_call
                def predict(model, x):
                    return model(x)
            """,
            "main.py": "from pkg import *\nimport pkg.modes as m\n",
        },
    )
    index = ProjectIndex.build(root, everything=True)
    assert index.lookup("pkg/modes.py", "evaluating").call is Kind.DISABLER
    assert index.lookup("pkg/modes.py", "no_grad_call").kind is Kind.DISABLER
    assert index.lookup("pkg/modes.py", "frozen").call is Kind.DISABLER
    assert index.lookup("pkg/modes.py", "inference").kind is Kind.DISABLER
    assert index.lookup("pkg/modes.py", "grad_on") is None
    assert index.lookup("pkg/eval.py", "modes.evaluating").call is Kind.DISABLER
    assert index.lookup("pkg/eval.py", "predict").kind is Kind.GRAD_OFF_FUNCTION
    assert index.lookup("main.py", "evaluating").call is Kind.DISABLER  # through two star imports
    assert index.lookup("main.py", "m.inference").kind is Kind.DISABLER


def test_module_classes_and_factories_across_files(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "models/base.py": "from torch import nn\n\nclass Backbone(nn.Module):\n    pass\n",
            "models/net.py": """
                import torch
                from models.base import Backbone

                class Net(Backbone):
                    pass

                class Plain:
                    pass

                class FocalLoss(torch.nn.modules.loss._Loss):
                    pass

                def build(cfg):
                    model = Net()
                    return model

                def make_optimizer(model):
                    return torch.optim.AdamW(model.parameters())

                def criterion():
                    return FocalLoss() if True else torch.nn.CrossEntropyLoss()
            """,
        },
    )
    index = ProjectIndex.build(root, everything=True)
    assert index.lookup("models/net.py", "Net").kind is Kind.MODULE_CLASS
    assert index.lookup("models/net.py", "Plain") is None
    assert index.lookup("models/net.py", "FocalLoss").kind is Kind.LOSS_CLASS
    assert index.lookup("models/net.py", "build").call is Kind.MODEL
    assert index.lookup("models/net.py", "make_optimizer").call is Kind.OPTIMIZER
    assert index.lookup("models/net.py", "criterion").call is Kind.LOSS


def test_import_cycles_end_in_no_claim_and_torch_cannot_be_redefined(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "a.py": "from b import helper\nfrom b import *\nloop = helper\n",
            "b.py": "from a import loop as helper\nfrom a import *\n",
            # a project file named like torch's API: `no_grad` here is a plain function
            "helpers.py": "def no_grad():\n    return None\n",
            "torch_shadow.py": "import torch\nno_grad = torch.enable_grad\n",
            "val.py": """
                import torch
                from helpers import no_grad
                from torch_shadow import no_grad as ng

                def evaluate(model, loader):
                    model.eval()
                    outs = []
                    for x in loader:
                        with no_grad():
                            outs.append(model(x))
                        with ng():
                            outs.append(model(x))
                    return outs
            """,
        },
    )
    index = ProjectIndex.build(root)
    assert index.lookup("a.py", "loop") is None
    assert index.lookup("b.py", "helper") is None
    assert agf001_lines(root, "val.py", index) != []  # neither helper turns grad off


def test_project_root_is_the_nearest_marker(tmp_path: Path) -> None:
    root = write(tmp_path, {"src/pkg/mod.py": ""})
    assert project_root([root / "src" / "pkg" / "mod.py"]) == root.resolve()
    assert project_root([root / "missing"]) is None
