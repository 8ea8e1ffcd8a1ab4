"""VALID / INVALID examples of `agf013_require_grad_typo` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. spelled right
    valid(
        """
import torch
x = torch.zeros(3)
x.requires_grad = True
"""
    ),
    # 2. a user class with its own `require_grad` attribute
    valid(
        """
import torch
class LayerConfig:
    def __init__(self, name):
        self.name = name
        self.require_grad = False

cfg = LayerConfig("fc")
cfg.require_grad = True
"""
    ),
    # 3. a plain variable named like the attribute
    valid(
        """
import torch
require_grad = False
x = torch.ones(2, requires_grad=require_grad)
"""
    ),
    # 4. an argparse namespace / config object: not a tensor
    valid(
        """
import torch
import argparse
parser = argparse.ArgumentParser()
args = parser.parse_args()
args.require_grad = True
"""
    ),
    # 5. a module: `requires_grad` is no module attribute either (report nothing, fix nothing)
    valid(
        """
import torch.nn as nn
model = nn.Linear(4, 2)
model.require_grad = False
"""
    ),
    # 6. a function parameter of unknown kind
    valid(
        """
import torch
def set_flag(obj, value):
    obj.require_grad = value
"""
    ),
    # 7. a name rebound to something else than a tensor in the same scope
    valid(
        """
import torch
from types import SimpleNamespace
x = torch.zeros(1)
x = SimpleNamespace()
x.require_grad = True
"""
    ),
    # 8. setattr with another attribute name
    valid(
        """
import torch
for p in model.parameters():
    setattr(p, "requires_grad", False)
"""
    ),
    # 9. loop over something that is not a parameter iterator
    valid(
        """
import torch
for layer in config.layers:
    layer.require_grad = False
"""
    ),
    # near spellings on a user class that defines that attribute itself
    valid(
        """
import torch
import torch.nn as nn


class FreezeSpec:
    def __init__(self, prefix, required_grad=False):
        self.prefix = prefix
        self.required_grad = required_grad


spec = FreezeSpec("encoder.")
spec.required_grad = True
spec.requires_grads = False
"""
    ),
    # the assignment reaching the typo is no tensor (a list of layer names), whatever comes later
    valid(
        """
import torch
frozen = ["embed", "encoder"]
frozen.require_grads = False
frozen = torch.zeros(3)
"""
    ),
]

INVALID = [
    # 1. TorchFix's fixture: a fresh tensor
    invalid(
        """
import torch
x = torch.zeros(1)
x.require_grad = True
""",
        """
import torch
x = torch.zeros(1)
x.requires_grad = True
""",
    ),
    # 2. freezing layers by name (pytorch/test-infra#4687)
    invalid(
        """
import torch.nn as nn
model = nn.Module()
for name, param in model.named_parameters():
    param.require_grad = 'specific_layer' in name
""",
        """
import torch.nn as nn
model = nn.Module()
for name, param in model.named_parameters():
    param.requires_grad = 'specific_layer' in name
""",
    ),
    # 3. freezing a backbone
    invalid(
        """
import torchvision

model = torchvision.models.resnet18()
for param in model.parameters():
    param.require_grad = False
""",
        """
import torchvision

model = torchvision.models.resnet18()
for param in model.parameters():
    param.requires_grad = False
""",
    ),
    # 4. setattr spelling
    invalid(
        """
import torch
def freeze(model):
    for p in model.parameters():
        setattr(p, "require_grad", False)
""",
        """
import torch
def freeze(model):
    for p in model.parameters():
        setattr(p, "requires_grad", False)
""",
    ),
    # 5. nn.Parameter, any import spelling
    invalid(
        """
from torch import nn
import torch as T
w = nn.Parameter(T.randn(3, 3))
w.require_grad = False
""",
        """
from torch import nn
import torch as T
w = nn.Parameter(T.randn(3, 3))
w.requires_grad = False
""",
    ),
    # 6. enumerate over named_parameters inside a function
    invalid(
        """
import torch
def freeze_first(model, k):
    for i, (name, param) in enumerate(model.named_parameters()):
        pass
    for i, param in enumerate(model.parameters()):
        param.require_grad = i >= k
""",
        """
import torch
def freeze_first(model, k):
    for i, (name, param) in enumerate(model.named_parameters()):
        pass
    for i, param in enumerate(model.parameters()):
        param.requires_grad = i >= k
""",
    ),
    # 7. a module's weight
    invalid(
        """
import torch.nn as nn
layer = nn.Linear(4, 2)
layer.weight.require_grad = False
""",
        """
import torch.nn as nn
layer = nn.Linear(4, 2)
layer.weight.requires_grad = False
""",
    ),
    # 8. a random flag on an input tensor, chained assignment kept
    invalid(
        """
import random
import torch
x = torch.randn(5)
grad = random.choice([False, True])
x.require_grad = grad
y = (x * 2).sum()
""",
        """
import random
import torch
x = torch.randn(5)
grad = random.choice([False, True])
x.requires_grad = grad
y = (x * 2).sum()
""",
    ),
    # 9. a positional-encoding buffer made from a factory and a conversion
    invalid(
        """
import torch
pe = torch.zeros(100, 16).float()
pe.require_grad = False
""",
        """
import torch
pe = torch.zeros(100, 16).float()
pe.requires_grad = False
""",
    ),
    # `required_grad` on a tensor that is rebound later (Time-Series-Library style positional table)
    invalid(
        """
import math
import torch

def sinusoid_table(length, width):
    table = torch.zeros(length, width).float()
    table.required_grad = False
    pos = torch.arange(0, length).float().unsqueeze(1)
    step = torch.exp(torch.arange(0, width, 2).float() * -(math.log(10000.0) / width))
    table[:, 0::2] = torch.sin(pos * step)
    table[:, 1::2] = torch.cos(pos * step)
    table = table.unsqueeze(0)
    return table
""",
        """
import math
import torch

def sinusoid_table(length, width):
    table = torch.zeros(length, width).float()
    table.requires_grad = False
    pos = torch.arange(0, length).float().unsqueeze(1)
    step = torch.exp(torch.arange(0, width, 2).float() * -(math.log(10000.0) / width))
    table[:, 0::2] = torch.sin(pos * step)
    table[:, 1::2] = torch.cos(pos * step)
    table = table.unsqueeze(0)
    return table
""",
    ),
    # `requires_grads` when freezing a pretrained backbone
    invalid(
        """
import torch.nn as nn

backbone = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Conv2d(8, 16, 3))
for weight in backbone.parameters():
    weight.requires_grads = False
""",
        """
import torch.nn as nn

backbone = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Conv2d(8, 16, 3))
for weight in backbone.parameters():
    weight.requires_grad = False
""",
    ),
]
