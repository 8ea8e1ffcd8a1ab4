"""Issue 18, F1: a module instance is found by evidence, never by how its name is spelt.

GAN and autoencoder code names its models `G`, `D`, `G_AB`, `Enc1`. A capitalised callee
used to be taken for a class constructor, so `G_AB.eval(); out = G_AB(x)` gave no finding
where `g_ab` did. Each case below runs AGF001 on one script twice, once with the
capitalised names and once with the same names in lower case, and expects the same
findings. A class of the file stays a constructor, whatever its spelling.
"""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.registry import rule_by_code
from autograd_fix.codemods.rule import RuleContext
from autograd_fix.codemods.semantic.module_calls import ModelCalls, ModelScope

AGF001 = rule_by_code("AGF001")

#: a GAN script: each model's evidence is different (a torch.nn constructor, an instance
#: of a same-file module class, `.eval()` on a value loaded from elsewhere)
GAN = """
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)


G = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
D = nn.Linear(4, 1)
G_AB = nn.Linear(4, 4)
Enc1 = Encoder()
opt = torch.optim.Adam(list(G.parameters()) + list(D.parameters()) + list(Enc1.parameters()))


def train(loader):
    samples = []
    for x in loader:
        loss = D(G(Enc1(x))).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        G_AB.eval()
        samples.append(G_AB(x))
        G_AB.train()
        D.eval()
        score = D(x)
        D.train()
        Enc1.eval()
        code = Enc1(x)
        Enc1.train()
        G.eval()
        fake = G(x)
        G.train()
    return samples, score, code, fake
"""

NAMES = ("G_AB", "Enc1", "G", "D")


def _lowercase(source: str) -> str:
    module = cst.parse_module(source)

    class Rename(cst.CSTTransformer):
        def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
            return updated.with_changes(value=updated.value.lower()) if updated.value in NAMES else updated

    return module.visit(Rename()).code


def _findings(source: str) -> list[tuple[str, int]]:
    result = check_source(textwrap.dedent(source).lstrip(), [AGF001], path="train.py",
                          options=FixOptions(unsafe_fixes=True))
    return [(finding.code, finding.span.line) for finding in result.findings]


def test_capitalised_models_are_found_like_lowercase_ones() -> None:
    capitalised = _findings(GAN)
    assert capitalised == _findings(_lowercase(GAN))
    # one finding per eval-mode forward: G_AB, D, Enc1 and G each ran in eval mode
    assert len(capitalised) == 4


@pytest.mark.parametrize("name", NAMES)
def test_one_capitalised_model_is_found_like_its_lowercase_spelling(name: str) -> None:
    source = textwrap.dedent(f"""
        import torch
        import torch.nn as nn

        {name} = nn.Linear(4, 4)
        opt = torch.optim.SGD({name}.parameters(), lr=0.1)


        def train(x):
            for step in range(3):
                loss = {name}(x).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
                {name}.eval()
                out = {name}(x)
                {name}.train()
            return out
        """)
    found = _findings(source)
    assert found == _findings(source.replace(name, name.lower()))
    assert found == [("AGF001", 15)]  # `out = ...(x)` in eval mode


def _calls(source: str, scope: ModelScope) -> list[bool]:
    module = cst.parse_module(textwrap.dedent(source))
    calls = ModelCalls(scope, ImportIndex.from_module(module))
    return [calls.is_model_call(node) for node in _all_calls(module)]


def _all_calls(module: cst.Module) -> list[cst.Call]:
    found: list[cst.Call] = []

    class Collect(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(node)

    module.visit(Collect())
    return found


def test_a_class_of_the_file_is_a_constructor_whatever_its_spelling() -> None:
    says_model = lambda name: True  # noqa: E731  (a name tie-break that would call anything a model)
    scope = ModelScope(says_model, classes=frozenset({"Net", "net"}))
    assert _calls("Net(4)\n", scope) == [False]  # capitalised class: a constructor
    assert _calls("net(4)\n", scope) == [False]  # the same class in lower case: still one
    assert _calls("Net.from_config(c)\n", scope) == [False]  # a class's own method
    # a capitalised value with evidence is a model, not a class
    evident = ModelScope(says_model, module_values=frozenset({"G_AB"}), classes=frozenset({"Net"}))
    assert _calls("G_AB(x)\n", evident) == [True]
    assert _calls("Net(4)\n", evident) == [False]


def test_a_capitalised_class_constructor_is_no_forward_in_agf001() -> None:
    source = """
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return self.fc(x)


        def train(x):
            model = Net()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(3):
                loss = model(x).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
                fresh = Net()
            return fresh
        """
    assert _findings(source) == []


LIKELY = """
import torch
import torch.nn as nn

G_AB = nn.Linear(4, 4)
model_opt = torch.optim.Adam(G_AB.parameters())

def build(encoder, width):
    return nn.Sequential(encoder, nn.Linear(width, 4))
"""


@pytest.mark.parametrize(
    ("name", "likely"),
    [
        ("G_AB", True),  # evidence: a torch.nn constructor, whatever the spelling
        ("model_opt", False),  # evidence: an optimizer; its `model` word does not outvote it
        ("encoder", True),  # no evidence: the module vocabulary breaks the tie
        ("width", False),  # no evidence, no module word
    ],
)
def test_likely_module_lets_names_break_ties_only(name: str, likely: bool) -> None:
    module = cst.parse_module(LIKELY)
    context = RuleContext("sample.py", module)
    build = next(s for s in module.body if isinstance(s, cst.FunctionDef))
    statement = build.body.body[-1]
    assert context.semantic.likely_module(cst.Name(name), statement) is likely
