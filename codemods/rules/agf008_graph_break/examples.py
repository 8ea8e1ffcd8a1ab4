"""VALID / INVALID examples of `agf008_graph_break` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. PGD attack: the input is re-wrapped on purpose, the loss is a real one
    valid(
        """
import torch
import torch.nn.functional as F

def pgd(model, x, y, eps, alpha, steps):
    x_adv = x.detach().clone().requires_grad_(True)
    for _ in range(steps):
        loss = F.cross_entropy(model(x_adv), y)
        loss.backward()
        x_adv = (x_adv + alpha * x_adv.grad.sign()).clamp(x - eps, x + eps).detach().requires_grad_(True)
    return x_adv
"""
    ),
    # 2. logging the loss value (not backpropagated)
    valid(
        """
import torch

def train_step(model, x, y, optimizer, history):
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    history.append(torch.tensor(loss.item()))
"""
    ),
    # 3. a learnable temperature created from a config value
    valid(
        """
import torch

class Contrastive(torch.nn.Module):
    def __init__(self, init_t):
        super().__init__()
        self.log_t = torch.nn.Parameter(torch.tensor(init_t).log())
"""
    ),
    # 4. targets via numpy: the target carries no gradient anyway
    valid(
        """
import numpy as np
import torch

def train_step(model, x, labels_np, optimizer):
    target = torch.from_numpy(np.asarray(labels_np)).long()
    loss = torch.nn.functional.cross_entropy(model(x), target)
    loss.backward()
    optimizer.step()
"""
    ),
    # 5. a saliency map: gradient w.r.t. a detached copy of the input is the goal
    valid(
        """
import torch

def saliency(model, image, label):
    image = image.detach().requires_grad_()
    score = model(image)[0, label]
    score.backward()
    return image.grad.abs()
"""
    ),
    # 6. the leaf's own gradient is read: a test of backward
    valid(
        """
import torch

def test_backward_of_scalar(value):
    leaf = torch.tensor(value.item(), requires_grad=True)
    leaf.backward()
    assert leaf.grad == 1.0
"""
    ),
    # 7. a user function named tensor, not torch's
    valid(
        """
from mylib import tensor

def step(loss):
    loss = tensor(loss.item(), requires_grad=True)
    loss.backward()
"""
    ),
    # 8. intentional stop-gradient with detach (no copy, no rewrap)
    valid(
        """
import torch

def byol_loss(online, target_net, x1, x2):
    with torch.no_grad():
        z = target_net(x2)
    p = online(x1)
    loss = 2 - 2 * torch.nn.functional.cosine_similarity(p, z.detach(), dim=-1).mean()
    loss.backward()
"""
    ),
    # 9. the rewrapped value goes through the model (meta-learning style), not a loss
    valid(
        """
import torch

def inner_step(model, x, y):
    w = torch.tensor(model.scale.item(), requires_grad=True)
    out = model(x) * w
    loss = (out - y).pow(2).mean()
    loss.backward()
    return w.grad
"""
    ),
    # a learnable weight vector made from numbers, and a logged copy of the terms without requires_grad
    valid(
        """
import torch
import torch.nn as nn


def fit(model, batches, optimizer):
    criterion = nn.MSELoss()
    weights = torch.tensor([0.5, 0.3, 0.2], requires_grad=True)
    history = []
    for inputs, targets in batches:
        outs = model(inputs)
        terms = torch.stack([criterion(o, targets) for o in outs])
        loss = (weights * terms).sum()
        history.append(torch.tensor([t.item() for t in terms]))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return history
"""
    ),
]

INVALID = [
    # 1. the classic: torch.tensor(loss.item(), requires_grad=True)
    invalid(
        """
import torch

def train(model, loader, optimizer, criterion):
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        # make backward happy
        loss = torch.tensor(loss.item(), requires_grad=True)
        loss.backward()
        optimizer.step()
""",
        """
def train(model, loader, optimizer, criterion):
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        # make backward happy
        loss.backward()
        optimizer.step()
""",
    ),
    # 2. Variable(loss.data, requires_grad=True) around the criterion call
    invalid(
        """
import torch
from torch.autograd import Variable

def train_step(net, images, labels, optimizer, criterion):
    optimizer.zero_grad()
    loss = Variable(criterion(net(images), labels).data, requires_grad=True)
    loss.backward()
    optimizer.step()
    return loss.item()
""",
        """
import torch

def train_step(net, images, labels, optimizer, criterion):
    optimizer.zero_grad()
    loss = criterion(net(images), labels)
    loss.backward()
    optimizer.step()
    return loss.item()
""",
    ),
    # 3. detach().requires_grad_() on a new name, AMP scaler backward
    invalid(
        """
import torch

def step(model, batch, optimizer, scaler):
    with torch.autocast("cpu"):
        raw = model(batch).mean()
    total = raw.detach().requires_grad_()
    scaler.scale(total).backward()
    scaler.step(optimizer)
    scaler.update()
""",
        """
import torch

def step(model, batch, optimizer, scaler):
    with torch.autocast("cpu"):
        raw = model(batch).mean()
    total = raw
    scaler.scale(total).backward()
    scaler.step(optimizer)
    scaler.update()
""",
    ),
    # 4. Lightning training_step returning a re-wrapped loss (clone().detach())
    invalid(
        """
import torch
import pytorch_lightning as pl

class Lit(pl.LightningModule):
    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self(x), y)
        return loss.clone().detach().requires_grad_(True)
""",
        """
import torch
import pytorch_lightning as pl

class Lit(pl.LightningModule):
    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self(x), y)
        return loss
""",
    ),
    # 5. backward called on the rewrap directly, with device=, alias import
    invalid(
        """
import torch as T

def update(model, x, y, opt, device):
    loss = (model(x) - y).abs().mean()
    T.tensor(loss.item(), requires_grad=True, device=device).backward()
    opt.step()
""",
        """
def update(model, x, y, opt, device):
    loss = (model(x) - y).abs().mean()
    loss.backward()
    opt.step()
""",
    ),
    # 6. the loss itself came from numpy: report only (the fix would raise)
    invalid(
        """
import torch

def train_step(model, x, target, optimizer, dice_np):
    pred = model(x)
    loss = torch.tensor(dice_np(pred.detach().cpu().numpy(), target.numpy()))
    loss = torch.tensor(loss.item(), requires_grad=True)
    loss.backward()
    optimizer.step()
"""
    ),
    # 7. torch.tensor(model_output) copied inside the loss: report only
    invalid(
        """
import torch
from torch import nn

def train(loader, optimizer):
    net = nn.Linear(4, 1)
    for x, y in loader:
        out = net(x)
        loss = (torch.tensor(out) - y).pow(2).mean() + out.abs().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""
    ),
    # 8. numpy round trip of the model output inside the loss: report only
    invalid(
        """
import torch
from torch import nn

model = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in batches:
    out = model(x)
    smoothed = torch.from_numpy(smooth(out.detach().cpu().numpy()))
    loss = ((smoothed - y) ** 2).mean() + 0.1 * out.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
    ),
    # 9. a sum of .item()s re-wrapped: report only (which terms? a person decides)
    invalid(
        """
import torch

def step(model, x, y, optimizer):
    l1 = (model(x) - y).abs().mean()
    l2 = model(x).pow(2).mean()
    loss = torch.tensor(l1.item() + 0.1 * l2.item(), requires_grad=True)
    loss.backward()
    optimizer.step()
"""
    ),
    # 10. a rewrap whose loss is computed under no_grad: report only
    invalid(
        """
import torch

def step(model, x, y, optimizer):
    with torch.no_grad():
        loss = (model(x) - y).pow(2).mean()
    loss = loss.detach().requires_grad_()
    loss.backward()
    optimizer.step()
"""
    ),
    # a comprehension of per-stage losses copied into a fresh leaf (DGUNet issue 6's shape): torch.stack keeps the graph
    invalid(
        """
import torch
import torch.nn as nn


class DeepSupervisionNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])

    def forward(self, x):
        outs = []
        for block in self.blocks:
            x = torch.relu(block(x))
            outs.append(x)
        return outs


def train(loader):
    net = DeepSupervisionNet()
    criterion = nn.MSELoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y in loader:
        outs = net(x)
        loss = torch.tensor([criterion(o, y) for o in outs], requires_grad=True).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
""",
        """
import torch
import torch.nn as nn


class DeepSupervisionNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])

    def forward(self, x):
        outs = []
        for block in self.blocks:
            x = torch.relu(block(x))
            outs.append(x)
        return outs


def train(loader):
    net = DeepSupervisionNet()
    criterion = nn.MSELoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y in loader:
        outs = net(x)
        loss = torch.stack([criterion(o, y) for o in outs]).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
""",
    ),
    # the same with a dtype conversion asked for: report only
    invalid(
        """
import torch
import torch.nn as nn


def fit(batches):
    model = nn.Linear(4, 1)
    optimizer = torch.optim.Adam(model.parameters())
    mse = nn.MSELoss()
    l1 = nn.L1Loss()
    for inputs, targets in batches:
        pred = model(inputs)
        terms = torch.tensor([mse(pred, targets), l1(pred, targets)], dtype=torch.float64, requires_grad=True)
        loss = terms.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""
    ),
]
