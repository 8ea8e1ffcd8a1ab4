"""Unit tests for `codemods/semantic/tracking.py` facts that travel through same-file calls."""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.semantic.model import SemanticModel
from autograd_fix.codemods.semantic.tracking import Kind
from autograd_fix.codemods.walk import iter_descendants


def _facts(source: str) -> dict[str, Kind | None]:
    """The tracked kind of each name at the file's last statement."""
    module = cst.parse_module(textwrap.dedent(source))
    tracking = SemanticModel(module, ImportIndex.from_module(module)).tracking
    last = module.body[-1]
    names = [line.body[0].targets[0].target.value for line in module.body  # type: ignore[attr-defined]
             if isinstance(line, cst.SimpleStatementLine) and isinstance(line.body[0], cst.Assign)]
    facts = {name: tracking.tracked(cst.Name(name), last) for name in names}
    return {name: fact.kind if fact is not None else None for name, fact in facts.items()}


def test_a_same_file_helper_returning_a_fresh_leaf_makes_one() -> None:
    facts = _facts(
        """
        import torch
        import torch.nn as nn

        def init_params(size, std=1.0):
            return (torch.randn(size) * std).requires_grad_()

        def make_weight(n):
            return nn.Parameter(torch.zeros(n))

        def passthrough(t):
            return t

        def sometimes(n, flag):
            if flag:
                return torch.zeros(n, requires_grad=True)
            return torch.zeros(n)

        weights = init_params((4, 1))
        w = make_weight(3)
        same = passthrough(weights)
        mixed = sometimes(3, True)
        done = 0
        """
    )
    assert facts["weights"] is Kind.REQUIRES_GRAD
    assert facts["w"] is Kind.PARAMETER
    assert facts["same"] is None
    assert facts["mixed"] is None


def test_add_module_registers_a_submodule_like_an_attribute_assignment() -> None:
    source = textwrap.dedent(
        """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, table):
                super().__init__()
                self.add_module("embed", nn.Embedding(10, 4))
                self.register_module("head", nn.Sequential(nn.Linear(4, 2)))
                self.add_module("lookup", table)
        """
    )
    module = cst.parse_module(source)
    tracking = SemanticModel(module, ImportIndex.from_module(module)).tracking
    modules = tracking.classes["Net"].modules
    assert modules["embed"] == "Embedding"
    assert modules["head"] == "Sequential"
    assert "lookup" not in modules  # a parameter of unknown type is not shown to be a module


def test_a_same_file_factory_builds_a_module_whose_last_layer_may_save_its_output() -> None:
    source = textwrap.dedent(
        """
        import torch.nn as nn

        def conv_block(cin, cout, act=True):
            return nn.Sequential(nn.Conv2d(cin, cout, 3), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

        def norm_last(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3), nn.ReLU(), nn.BatchNorm2d(cout))

        def either(cin, cout, act):
            if act:
                return conv_block(cin, cout)
            return nn.Conv2d(cin, cout, 1)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = conv_block(3, 8)
                self.tail = norm_last(8, 8)
                self.head = either(8, 8, True)
                self.gate = nn.Sequential(nn.Linear(8, 8), nn.Sigmoid())
        """
    )
    module = cst.parse_module(source)
    tracking = SemanticModel(module, ImportIndex.from_module(module)).tracking
    info = tracking.classes["Net"]
    assert info.modules == {"stem": "Sequential", "tail": "Sequential", "gate": "Sequential"}
    assert info.output_saving == {"stem", "gate"}  # a factory with two returns stays unknown


def test_module_list_items_save_their_output_only_when_every_item_does() -> None:
    source = textwrap.dedent(
        """
        import torch.nn as nn

        def conv_relu(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 1), nn.ReLU(inplace=False))

        class Head(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.laterals = nn.ModuleList()
                for i in range(n):
                    self.laterals.append(conv_relu(8, 8))
                self.gates = nn.ModuleList([nn.Sigmoid() for _ in range(n)])
                self.mixed = nn.ModuleList([conv_relu(8, 8), nn.Conv2d(8, 8, 1)])
                self.grown = nn.ModuleList([nn.ReLU()])
                self.grown += [nn.Conv2d(8, 8, 1)]
                self.extended = nn.ModuleList()
                self.extended.extend(layers)
        """
    )
    module = cst.parse_module(source)
    tracking = SemanticModel(module, ImportIndex.from_module(module)).tracking
    assert tracking.classes["Head"].saving_items == {"laterals", "gates"}


def test_every_binding_of_a_submodule_must_save_its_output() -> None:
    source = textwrap.dedent(
        """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, gated):
                super().__init__()
                if gated:
                    self.act = nn.Sigmoid()
                else:
                    self.act = nn.Identity()
                self.gate = nn.Sigmoid()
                self.blocks = nn.ModuleList([nn.ReLU()])
                if gated:
                    self.blocks = nn.ModuleList([nn.Conv2d(3, 3, 1)])
        """
    )
    module = cst.parse_module(source)
    info = SemanticModel(module, ImportIndex.from_module(module)).tracking.classes["Net"]
    assert info.output_saving == {"gate"}
    assert info.saving_items == set()


GAP = """
import torch
import torch.nn as nn


def normalize_and_scale(delta_im, mode="train"):
    if mode == "crop":
        delta_im = nn.ConstantPad2d((0, -1, -1, 0), 0)(delta_im)
    delta_im.data *= 0.5
    return delta_im


def mixed(t):
    t.data += 1
    return t


def train(netG, image, opt):
    delta_im = netG(image)
    delta_im = normalize_and_scale(delta_im, "train")
    noise = mixed(torch.randn(2))
    other = mixed(netG(image))
    recons = image + delta_im
    loss = recons.sum()
    loss.backward()
"""


def _tracking_of(source: str):
    module = cst.parse_module(textwrap.dedent(source))
    return module, SemanticModel(module, ImportIndex.from_module(module)).tracking


def _line(module: cst.Module, function: str, text: str) -> cst.SimpleStatementLine:
    node = next(s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == function)
    return next(
        line for line in iter_descendants(node)
        if isinstance(line, cst.SimpleStatementLine) and text in module.code_for_node(line)
    )


def test_a_parameter_every_caller_passes_a_graph_to_carries_one() -> None:
    module, tracking = _tracking_of(GAP)
    helper = next(s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == "normalize_and_scale")
    facts = tracking.parameter_facts(helper)
    assert facts is not None and set(facts) == {"delta_im"} and facts["delta_im"].kind == Kind.DERIVED
    update = _line(module, "normalize_and_scale", "delta_im.data *= 0.5")
    fact = tracking.tracked(cst.Name("delta_im"), update)  # also through the inline `nn.ConstantPad2d(...)(x)` branch
    assert fact is not None and not fact.leaf
    mixed = _line(module, "mixed", "t.data += 1")
    assert tracking.tracked(cst.Name("t"), mixed) is None  # one caller passes a fresh tensor


def test_a_helper_handing_its_graph_carrying_argument_back_returns_a_graph() -> None:
    module, tracking = _tracking_of(GAP)
    after = _line(module, "train", "recons = image + delta_im")
    assert tracking.tracked(cst.Name("delta_im"), after) is not None
    assert tracking.tracked(cst.Name("other"), after) is None  # `mixed` has a caller without a graph


def test_a_helper_defined_after_its_caller_gets_its_facts_too() -> None:
    source = GAP.replace("def train(netG, image, opt):", "def train(netG, image, opt):  # first")
    helper_start = source.index("def normalize_and_scale")
    train_start = source.index("def train")
    moved = source[:helper_start] + source[train_start:] + "\n\n" + source[helper_start:train_start]
    module, tracking = _tracking_of(moved)
    update = _line(module, "normalize_and_scale", "delta_im.data *= 0.5")
    assert tracking.tracked(cst.Name("delta_im"), update) is not None
