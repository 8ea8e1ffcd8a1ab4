"""Unit tests for `codemods/module_values.py`: modules found from how a class builds them."""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.semantic.module_values import constant_attributes, module_attributes, module_loop_names

SOURCE = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self, dims):
            super().__init__()
            self.layers = []
            for d in range(len(dims) - 1):
                self.layers = self.layers + [Layer(dims[d], dims[d + 1])]
            self.head = nn.Linear(dims[-1], 10)
            self.scale = nn.Parameter(torch.ones(1))
            self.threshold = 2.0

        def predict(self, x):
            for layer in self.layers:
                x = layer(x)
            for i, block in enumerate(self.layers):
                pass
            for value in self.values:
                pass
            return self.head(x).argmax(1)
    """
)


def _parts() -> tuple[cst.ClassDef, cst.FunctionDef, ImportIndex]:
    module = cst.parse_module(SOURCE)
    net = next(node for node in module.body if isinstance(node, cst.ClassDef))
    predict = next(s for s in net.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "predict")
    return net, predict, ImportIndex.from_module(module)


def test_attributes_built_from_modules_in_init() -> None:
    net, _, imports = _parts()
    assert module_attributes(net, {"Layer", "Net"}, imports) == {"self.layers", "self.head"}


def test_an_unknown_class_is_not_a_module() -> None:
    net, _, imports = _parts()
    assert module_attributes(net, set(), imports) == {"self.head"}


def test_loops_over_module_containers_bind_modules() -> None:
    _, predict, _ = _parts()
    loops = [node for node in predict.body.body if isinstance(node, cst.For)]
    assert module_loop_names(loops, frozenset({"self.layers", "self.head"})) == {"layer", "block"}


def test_constant_attributes_are_set_once_in_init_from_literals_or_parameters() -> None:
    module = cst.parse_module(
        textwrap.dedent(
            """
            class Trainer:
                def __init__(self, model, gama=0.8):
                    self.model = model
                    self.gama = gama
                    self.scale = 1 - gama
                    self.aux_loss = 0
                    self.prior = 0
                    self.history = []
                    self.fc = nn.Linear(2, 2)

                def step(self, x):
                    self.prior = self.model(x).mean()
                    self.history.append(x)
            """
        )
    )
    trainer = next(node for node in module.body if isinstance(node, cst.ClassDef))
    assert constant_attributes(trainer) == {"model", "gama", "scale", "aux_loss"}


def test_containers_whose_items_are_put_in_eval_mode_hold_modules() -> None:
    module = cst.parse_module(
        textwrap.dedent(
            """
            class Trainer:
                def __init__(self, model, criterion):
                    self.model = model
                    self.criterion = criterion

                def _eval_epoch(self):
                    for key in self.model.keys():
                        self.model[key].eval()
                    self.criterion["mse"].to("cpu")
            """
        )
    )
    trainer = next(node for node in module.body if isinstance(node, cst.ClassDef))
    assert module_attributes(trainer, set(), ImportIndex.from_module(module)) == {"self.model"}
