"""One answer to "is this class an nn.Module?" (issue 18, item 2).

Before, three implementations answered it: the call graph's (`callgraph.is_module_class`:
a base whose name ends in `Module`, or a `forward` method), the tracking analysis's (the
same, less `autograd.Function`s) and the role evidence's (`role_evidence.module_classes`:
`nn.Module`, a `torch.nn` class, or an earlier same-file module). They split on ordinary
classes: each case below names what the three said. Now `nn_modules.class_is_module`
answers, three-valued, and every consumer reads that one answer.
"""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.rule import RuleContext
from autograd_fix.codemods.semantic.answer import Answer
from autograd_fix.codemods.semantic.nn_modules import module_class_name, module_classes
from autograd_fix.codemods.semantic.role_evidence import Basis, model_names
from autograd_fix.codemods.semantic.roles import Role

HEADER = """
import torch
import torch.nn as nn
import pytorch_lightning as pl
from mmcv.runner import BaseModule
from models.base import BaseModel

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)
"""

# (class source, the one answer, what (call graph, tracking, role evidence) said before)
CASES = {
    # a subclass of a torch.nn container without its own forward: (no, no, yes)
    "Encoder": ("class Encoder(nn.Sequential):\n    pass\n", Answer.YES),
    # a subclass of a same-file module without its own forward: (no, no, yes)
    "Wider": ("class Wider(Net):\n    def __init__(self):\n        super().__init__()\n", Answer.YES),
    # a Lightning module: (yes, yes, no)
    "Lit": ("class Lit(pl.LightningModule):\n    def training_step(self, batch, i):\n        return batch\n", Answer.YES),
    # a plain class with a `forward` method, no base: no module (yes, yes, no)
    "Pipeline": ("class Pipeline:\n    def forward(self, x):\n        return x * 2\n", Answer.NO),
    # an autograd.Function: (yes, no, no)
    "Square": (
        "class Square(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        return x * x\n",
        Answer.NO,
    ),
    # a base from another library whose name ends in Module, and no code of a module: (yes, yes, no)
    "Head": ("class Head(BaseModule):\n    def init_weights(self):\n        pass\n", Answer.UNKNOWN),
    # a base this file cannot see, but the class's own code is a module's: (no, no, no)
    "Tower": ("class Tower(BaseModel):\n    def __init__(self):\n        self.register_buffer('mean', torch.zeros(3))\n", Answer.YES),
    # a dataset: (no, no, no)
    "Pairs": ("class Pairs(torch.utils.data.Dataset):\n    def __len__(self):\n        return 3\n", Answer.NO),
}


def _source() -> str:
    return HEADER + "\n" + "\n".join(source for source, _ in CASES.values()) + "\n" + "\n".join(
        f"{name.lower()}_instance = {name}()" for name in CASES
    )


@pytest.fixture(scope="module")
def context() -> RuleContext:
    module = cst.parse_module(textwrap.dedent(_source()))
    return RuleContext("models.py", module)


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_answer_per_class(context: RuleContext, name: str) -> None:
    assert context.semantic.module_classes[name] is CASES[name][1]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_former_implementations_read_the_one_answer(context: RuleContext, name: str) -> None:
    certain = CASES[name][1] is Answer.YES
    # the call graph (AGF001, AGF002, AGF006: `self(...)` in a module's method runs it)
    assert (name in context.semantic.call_graph.module_classes) is certain
    # the tracking analysis (AGF003, AGF009: `self.fc` of a module is a parameterised layer)
    assert context.semantic.tracking.classes[name].module_like is certain
    # the role evidence: an instance built from the class is a model by evidence
    decision = context.semantic.roles_in(context.module).get(f"{name.lower()}_instance")
    assert (f"{name.lower()}_instance" in model_names(context.semantic.roles_in(context.module))) is certain
    if certain:
        assert decision is not None and decision.role is Role.MODEL and decision.basis is Basis.BOUND


def test_a_name_says_nothing() -> None:
    # `G_AB` is capitalised like a class but holds a module; `Config` holds no module
    module = cst.parse_module(textwrap.dedent(
        """
        import torch.nn as nn

        class Config:
            lr = 0.1

        class G_AB(Config):
            def forward(self, x):
                return x
        """
    ))
    answers = module_classes(module, ImportIndex.from_module(module))
    assert answers == {"Config": Answer.NO, "G_AB": Answer.NO}


@pytest.mark.parametrize(
    ("qualified", "answer"),
    [
        ("torch.nn.Linear", Answer.YES),
        ("torch.nn.parallel.DistributedDataParallel", Answer.YES),
        ("lightning.pytorch.LightningModule", Answer.YES),
        ("torch.nn.Parameter", Answer.NO),
        ("torch.nn.functional.relu", Answer.NO),
        ("torch.nn.init.zeros_", Answer.NO),
        ("torch.optim.Adam", Answer.NO),
        ("timm.models.VisionTransformer", Answer.UNKNOWN),
    ],
)
def test_imported_callees(qualified: str, answer: Answer) -> None:
    assert module_class_name(qualified) is answer


def test_an_answer_is_never_read_as_a_bool() -> None:
    with pytest.raises(TypeError):
        bool(Answer.UNKNOWN)
    assert Answer.UNKNOWN.possible and Answer.YES.possible and not Answer.NO.possible


VALUES = """
import torch
import torch.nn as nn

class Encoder(nn.Module):
    def forward(self, x):
        return x

class Options:
    lr = 0.1

def load(path):
    return torch.load(path)

G_AB = nn.Linear(4, 4)
E1 = Encoder()
D = load("d.pt")
D.eval()
opt = torch.optim.Adam(G_AB.parameters())
Cfg = Options()
Net = load("n.pt")
g_ab = nn.Linear(4, 4)

def sample(z):
    G_AB.eval()
    return G_AB(z), D(z), Net(z), g_ab(z)
"""


@pytest.mark.parametrize(
    ("name", "answer"),
    [
        ("G_AB", Answer.YES),  # built by a torch.nn constructor: capitalised, still a module (F1)
        ("g_ab", Answer.YES),  # the same, spelt in lower case: the same answer
        ("E1", Answer.YES),  # an instance of a same-file module class
        ("D", Answer.YES),  # unknown origin, but put in eval mode
        ("opt", Answer.NO),  # an optimizer, by its constructor
        ("Cfg", Answer.NO),  # an instance of a same-file class that is no module
        ("Net", Answer.UNKNOWN),  # a name that looks like a class says nothing either way
    ],
)
def test_is_a_value_a_module(name: str, answer: Answer) -> None:
    module = cst.parse_module(textwrap.dedent(VALUES))
    context = RuleContext("sample.py", module)
    sample = next(s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == "sample")
    statement = sample.body.body[-1]
    assert context.semantic.is_module(cst.Name(name), statement) is answer
    # at module level too, after the bindings
    assert context.semantic.is_module(cst.Name(name), module.body[-1]) is answer
