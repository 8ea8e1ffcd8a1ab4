"""Roles: evidence decides, names only break ties, unknown where evidence disagrees, and a
project's `[tool.autograd-fix]` extends both (codemods/semantic/roles.py, role_evidence.py)."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from autograd_fix.cli.config import ConfigError, load_config
from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.registry import rule_by_code
from autograd_fix.codemods.semantic.role_evidence import Basis, RoleDecision, roles_in
from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY, Role, Vocabulary


def _roles(source: str, scope: str | None = None, vocabulary: Vocabulary = DEFAULT_VOCABULARY) -> dict[str, RoleDecision]:
    """Role decisions in the function or class `scope` of `source` (the module if None)."""
    module = cst.parse_module(textwrap.dedent(source))
    imports = ImportIndex.from_module(module)
    node: cst.Module | cst.ClassDef | cst.FunctionDef = module
    if scope is not None:
        node = next(s for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef)) and s.name.value == scope)
    return roles_in(node, imports, vocabulary, module)


TRAINING_SCRIPT = """
import torch
import torch.nn as nn
import torch.optim as O
from torch.optim.lr_scheduler import CosineAnnealingLR
from torch.utils.data import DataLoader


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)


class DeepEncoder(Encoder):
    pass


class FocalLoss(nn.Module):
    pass


def train(opt: nn.Module, dataset, epochs: int, device):
    g = O.Adam(opt.parameters(), lr=1e-3)
    warm = CosineAnnealingLR(g, T_max=epochs)
    batches = DataLoader(dataset, batch_size=32, shuffle=True)
    crit = nn.CrossEntropyLoss()
    focal = FocalLoss()
    enc = DeepEncoder().to(device)
    for epoch in range(epochs):
        for x, y in batches:
            g.zero_grad()
            out = opt(enc(x))
            err = crit(out, y) + focal(out, y)
            err.backward()
            g.step()
        warm.step()
"""


def test_constructors_and_annotations_beat_names() -> None:
    roles = _roles(TRAINING_SCRIPT, "train")
    # an optimizer called `g`, a model called `opt`: evidence, not the name, decides
    assert roles["g"] == RoleDecision(Role.OPTIMIZER, Basis.BOUND, "built by torch.optim.Adam")
    assert roles["opt"].role is Role.MODEL and roles["opt"].certain
    assert roles["warm"].role is Role.SCHEDULER and roles["warm"].certain
    assert roles["batches"].role is Role.LOADER and roles["batches"].why == "built by torch.utils.data.DataLoader"
    assert roles["crit"].role is Role.CRITERION
    # same-file nn.Module subclasses, through another subclass and through `.to(device)`
    assert roles["enc"].role is Role.MODEL and roles["enc"].certain
    assert roles["focal"].role is Role.CRITERION
    # what a criterion returns is a loss, and `.backward()` agrees
    assert roles["err"].role is Role.LOSS and roles["err"].certain
    # `dataset` and `device` have no evidence: their names break the tie
    assert roles["dataset"].basis is Basis.NAME and roles["dataset"].role is Role.LOADER
    assert roles["device"].basis is Basis.NAME and roles["device"].role is Role.DEVICE


def test_use_decides_without_constructors() -> None:
    roles = _roles(
        """
        import torch.nn.functional as F

        def fit(net, it, updater, n_steps):
            for inputs, labels in enumerate(it):
                updater.zero_grad()
                value = F.cross_entropy(net(inputs), labels)
                value.backward()
                updater.step()
        """,
        "fit",
    )
    assert roles["updater"] == RoleDecision(Role.OPTIMIZER, Basis.USE, "both .zero_grad() and .step() are called on it")
    assert roles["it"].role is Role.LOADER and roles["it"].certain
    assert roles["value"].role is Role.LOSS and roles["value"].certain
    # `net` is only called: its name breaks the tie
    assert roles["net"] == RoleDecision(Role.MODEL, Basis.NAME, "named 'net'")
    assert "n_steps" not in roles


def test_binding_evidence_outweighs_use() -> None:
    roles = _roles(
        """
        import torch.nn as nn

        def describe(x):
            layers = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
            for layer in layers:
                x = layer(x)
            return x
        """,
        "describe",
    )
    # iterating an nn.Sequential does not make it a data loader
    assert roles["layers"].role is Role.MODEL and roles["layers"].basis is Basis.BOUND


def test_disagreeing_evidence_is_unknown() -> None:
    roles = _roles(
        """
        import torch

        def odd(thing, params):
            for chunk in thing:
                print(chunk)
            thing.backward()
            swap = torch.optim.SGD(params, lr=0.1)
            swap = torch.utils.data.DataLoader(params)
        """,
        "odd",
    )
    assert roles["thing"].role is None and roles["thing"].basis is Basis.CONFLICT
    assert roles["swap"].role is None and not roles["swap"].certain


def test_class_scope_reads_every_method() -> None:
    roles = _roles(
        """
        import torch
        from torch.cuda.amp import GradScaler

        class Trainer:
            def __init__(self, model, lr):
                self.model = model
                self.sgd_state = torch.optim.SGD(model.parameters(), lr=lr)
                self.amp_helper = GradScaler()

            def train_step(self, batch):
                loss = self.model(batch).mean()
                self.amp_helper.scale(loss).backward()
                self.amp_helper.step(self.sgd_state)
        """,
        "Trainer",
    )
    assert roles["self.sgd_state"].role is Role.OPTIMIZER and roles["self.sgd_state"].certain
    assert roles["self.amp_helper"].role is Role.SCALER and roles["self.amp_helper"].certain


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("val_loader", Role.LOADER),
        ("model_optimizer", Role.OPTIMIZER),  # the last word with a role decides
        ("optimizerD", Role.OPTIMIZER),
        ("netG", Role.MODEL),
        ("loss_fn", Role.CRITERION),  # a phrase beats the single word "loss"
        ("total_loss", Role.LOSS),
        ("lr_scheduler", Role.SCHEDULER),
        ("h0", Role.STATE),
        ("train_device", Role.DEVICE),
        ("num_epochs", None),
        ("lr", None),  # a number, not a scheduler
    ],
)
def test_names_break_ties(name: str, role: Role | None) -> None:
    assert DEFAULT_VOCABULARY.role_by_name(name) is role


def test_configured_factory_and_names_change_the_decision() -> None:
    source = """
        from mypkg.training import make_optimizer

        def fit(mdl, loader, epochs):
            tr = make_optimizer(mdl)
            for x, y in loader:
                mdl(x).sum().backward()
                tr.step()
        """
    plain = _roles(source, "fit")
    assert "tr" not in plain and "mdl" not in plain
    configured = DEFAULT_VOCABULARY.extended({Role.MODEL: ["mdl"]}, {Role.OPTIMIZER: ["mypkg.training.make_optimizer"]})
    roles = _roles(source, "fit", configured)
    assert roles["tr"] == RoleDecision(Role.OPTIMIZER, Basis.BOUND, "built by mypkg.training.make_optimizer (configured)")
    assert roles["mdl"].role is Role.MODEL and roles["mdl"].basis is Basis.NAME


FACTORY_TRAINING = """
import torch.nn.functional as F
from mypkg.training import make_optimizer


def fit(model, loader, epochs):
    tr = make_optimizer(model)
    for epoch in range(epochs):
        for x, y in loader:
            loss = F.mse_loss(model(x), y)
            loss.backward()
            tr.step()
"""


def test_pyproject_roles_reach_the_rules(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.autograd-fix]\noptimizer-objects = ["mypkg.training.make_optimizer"]\nmodel-names = ["mdl"]\n'
    )
    config = load_config(tmp_path)
    assert config.roles.object_role("mypkg.training.make_optimizer") is Role.OPTIMIZER
    assert config.roles.role_by_name("mdl") is Role.MODEL
    rule = rule_by_code("AGF002")
    # without the setting nothing says `tr` is an optimizer: no finding
    assert check_source(FACTORY_TRAINING, [rule], options=FixOptions()).findings == []
    found = check_source(FACTORY_TRAINING, [rule], options=FixOptions(roles=config.roles)).findings
    assert [(f.code, f.span.line) for f in found] == [("AGF002", 12)]


def test_pyproject_role_keys_are_checked(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.autograd-fix]\noptimizer-objects = "mypkg.make"\n')
    with pytest.raises(ConfigError, match="optimizer-objects must be a list of strings"):
        load_config(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.autograd-fix]\noptimiser-objects = ["mypkg.make"]\n')
    with pytest.raises(ConfigError, match="unknown .* keys: optimiser-objects"):
        load_config(tmp_path)


def test_agf002_sees_an_optimizer_by_its_constructor() -> None:
    source = textwrap.dedent(
        """
        import torch
        import torch.nn.functional as F

        def fit(model, loader):
            g = torch.optim.Adam(model.parameters())
            for x, y in loader:
                loss = F.mse_loss(model(x), y)
                loss.backward()
                g.step()
        """
    )
    found = check_source(source, [rule_by_code("AGF002")], options=FixOptions()).findings
    assert [f.span.line for f in found] == [10]
    assert "`g` steps" in found[0].message


def test_vocabulary_travels_to_worker_processes() -> None:
    configured = DEFAULT_VOCABULARY.extended({Role.LOADER: ["feed"]}, {Role.MODEL: ["mypkg.build"]})
    copy = pickle.loads(pickle.dumps(configured))
    assert copy == configured and hash(copy) == hash(configured)
    assert copy.role_by_name("train_feed") is Role.LOADER and copy.object_role("mypkg.build") is Role.MODEL


def test_vocabulary_imports_no_libcst() -> None:
    """verification imports the vocabulary; it must stay free of libcst and other codemods modules."""
    code = (
        "import sys; import autograd_fix.codemods.semantic.roles as r; "
        "bad = [m for m in sys.modules if m == 'libcst' or (m.startswith('autograd_fix.codemods.') and m not in "
        "('autograd_fix.codemods.semantic', 'autograd_fix.codemods.semantic.roles'))]; print(bad)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


@pytest.mark.torch
def test_binder_reads_model_names_with_the_same_vocabulary() -> None:
    from autograd_fix.verification.binding import model_name

    assert model_name("netG") and model_name("encoders") and model_name("module") and model_name("m")
    # a number about a model is a number
    assert not model_name("model_dim") and not model_name("num_heads") and not model_name("ema_decay")


RETAINING_LOOPS = """
import torch
from torch.utils.data import DataLoader


def fit(model, dataset, criterion, optimizer):
    dl = DataLoader(dataset, batch_size=32)
    for x, y in dl:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward(retain_graph=True)
        optimizer.step()


def fit_feed(model, feed, criterion, optimizer):
    for x, y in feed:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward(retain_graph=True)
        optimizer.step()
"""


def test_agf011_knows_a_loader_by_its_constructor_and_by_configured_names() -> None:
    rule = rule_by_code("AGF011")
    # `dl` is built by DataLoader: fresh batches each iteration, so nothing needs the graph;
    # `feed` has neither evidence nor a loader's name: the rule stays silent there
    assert [f.span.line for f in check_source(RETAINING_LOOPS, [rule], options=FixOptions()).findings] == [11]
    configured = DEFAULT_VOCABULARY.extended({Role.LOADER: ["feed"]}, {})
    found = check_source(RETAINING_LOOPS, [rule], options=FixOptions(roles=configured)).findings
    assert [f.span.line for f in found] == [11, 19]


RECURRENT_CONTEXT = """
import torch
from torch import nn


def train(lstm, decoder, batches, optimizer):
    ctx = torch.zeros(2, 16, 64)
    for x, y in batches:
        optimizer.zero_grad()
        out, ctx = lstm(x, ctx)
        loss = nn.functional.cross_entropy(decoder(out).flatten(0, 1), y.flatten())
        loss.backward()
        optimizer.step()
"""


def test_agf010_state_names_extend_what_reads_as_recurrent_state() -> None:
    rule = rule_by_code("AGF010")
    assert check_source(RECURRENT_CONTEXT, [rule], options=FixOptions()).findings == []
    configured = DEFAULT_VOCABULARY.extended({Role.STATE: ["ctx"]}, {})
    found = check_source(RECURRENT_CONTEXT, [rule], options=FixOptions(roles=configured)).findings
    assert [(f.code, f.span.line) for f in found] == [("AGF010", 10)]


@pytest.mark.parametrize(
    ("statement", "plain", "configured"),
    [
        ("optimizer.step()", True, True),
        ("scheduler.step()", False, False),
        ("lr_warmup.step()", False, False),
        ("env.step(action)", False, False),
        ("cosine_decay.step()", True, False),  # the project calls its schedulers "decay"
    ],
)
def test_optimizer_steps_by_receiver(statement: str, plain: bool, configured: bool) -> None:
    from autograd_fix.codemods.semantic.gradmode import is_optimizer_step

    call = cst.parse_expression(statement)
    assert isinstance(call, cst.Call)
    assert is_optimizer_step(call) is plain
    assert is_optimizer_step(call, DEFAULT_VOCABULARY.extended({Role.SCHEDULER: ["decay"]}, {})) is configured


EVALUATE_BACKBONE = """
import torch


def evaluate(resnet, val_loader):
    correct = 0
    for images, labels in val_loader:
        outputs = resnet(images)
        correct += (outputs.argmax(1) == labels).sum().item()
    return correct / len(val_loader.dataset)
"""


def test_agf001_model_names_decide_what_a_bare_parameter_is() -> None:
    # nothing in the file shows `resnet` is a module: by default the rule stays silent;
    # a project that names its models so (`model-names = ["resnet"]`) gets the finding
    rule = rule_by_code("AGF001")
    assert check_source(EVALUATE_BACKBONE, [rule], options=FixOptions()).findings == []
    configured = DEFAULT_VOCABULARY.extended({Role.MODEL: ["resnet"]}, {})
    found = check_source(EVALUATE_BACKBONE, [rule], options=FixOptions(roles=configured)).findings
    assert [(f.code, f.span.line) for f in found] == [("AGF001", 5)]
