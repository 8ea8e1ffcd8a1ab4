"""VALID / INVALID examples of `agf015_zero_grad_set_to_none_false` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. the default
    valid(
        """
import torch
optimizer.zero_grad()
"""
    ),
    # 2. set_to_none=True spelled out
    valid(
        """
import torch
optimizer.zero_grad(set_to_none=True)
"""
    ),
    # 3. a variable flag: the author decides per run
    valid(
        """
import torch
def step(optimizer, keep_zeros):
    optimizer.zero_grad(set_to_none=not keep_zeros)
"""
    ),
    # 4. the file defines its own zero_grad(set_to_none=...)
    valid(
        """
import torch
class Accumulator:
    def zero_grad(self, set_to_none=False):
        self.total = 0

acc = Accumulator()
acc.zero_grad(set_to_none=False)
"""
    ),
    # 5. a different keyword
    valid(
        """
import torch
model.zero_grad(set_to_none=None)
"""
    ),
    # 6. an object the file shows is a data loader, not an optimizer
    valid(
        """
from torch.utils.data import DataLoader

loader = DataLoader(dataset)
loader.zero_grad(set_to_none=False)
"""
    ),
    # 7. a manual zeroing loop: no zero_grad call to rewrite
    valid(
        """
import torch
for p in model.parameters():
    if p.grad is not None:
        p.grad.zero_()
"""
    ),
    # 8. set_to_none passed to something else
    valid(
        """
import torch
reset(set_to_none=False)
"""
    ),
    # 9. a parameter server accumulates workers' gradients into .grad by hand: it needs the zeros
    valid(
        """
import torch

class BatchUpdateParameterServer:
    def update_and_fetch_model(self, grads):
        for p, g in zip(self.model.parameters(), grads):
            p.grad += g
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=False)
"""
    ),
    # a pytest test of the wrapper's argument passing (Lightning's test_wrappers): it trains nothing
    valid(
        """
from unittest import mock

import torch
from lightning.fabric.wrappers import _FabricOptimizer


def test_fabric_optimizer_zero_grad_kwargs():
    with mock.patch("torch.optim.SGD.zero_grad") as zero_grad_mock:
        optimizer = torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), 0.1)
        fabric_optimizer = _FabricOptimizer(optimizer=optimizer, strategy=mock.Mock())
        fabric_optimizer.zero_grad(set_to_none=False)
        zero_grad_mock.assert_called_with(set_to_none=False)
""",
        filename="tests/test_wrappers.py",
    ),
    # a file that trains across processes: keeping sharded gradient buffers can be deliberate
    valid(
        """
import torch
import torch.distributed as dist

def train_step(model, optimizer, batch, group):
    loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=False)
    dist.all_reduce(loss, op=dist.ReduceOp.AVG, group=group)
    return loss
"""
    ),
    # a test that checks the argument is passed on (Lightning's Fabric wrapper test, found
    # in the real-code audit): a pytest test that takes no gradient checks the call itself
    valid(
        """
from unittest import mock

import torch

def test_zero_grad_kwargs():
    with mock.patch("torch.optim.SGD.zero_grad") as zero_grad_mock:
        optimizer = torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), 0.1)
        wrapped = Wrapper(optimizer)
        wrapped.zero_grad(set_to_none=False)
        zero_grad_mock.assert_called_with(set_to_none=False)
""",
        filename="tests/test_wrappers.py",
    ),
]

INVALID = [
    # a pytest test that trains: its steps zero with a fill like any training loop
    invalid(
        """
import torch


def test_loss_decreases():
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        optimizer.zero_grad(set_to_none=False)
        model(torch.randn(4, 2)).sum().backward()
        optimizer.step()
""",
        """
import torch


def test_loss_decreases():
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.randn(4, 2)).sum().backward()
        optimizer.step()
""",
        filename="tests/test_training.py",
    ),
    # 1. TorchFix's fixture: optimizer and module
    invalid(
        """
import torch
import torch.nn as nn

model = nn.Sequential()
optimizer = torch.optim.Adam(model.parameters())
optimizer.zero_grad(set_to_none=False)
model.zero_grad(set_to_none=False)
""",
        """
import torch
import torch.nn as nn

model = nn.Sequential()
optimizer = torch.optim.Adam(model.parameters())
optimizer.zero_grad()
model.zero_grad()
""",
    ),
    # 2. inside a training loop
    invalid(
        """
import torch
def train(model, loader, optimizer, criterion):
    for x, y in loader:
        optimizer.zero_grad(set_to_none=False)
        criterion(model(x), y).backward()
        optimizer.step()
""",
        """
import torch
def train(model, loader, optimizer, criterion):
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
""",
    ),
    # 3. an optimizer held on self
    invalid(
        """
import torch
class Trainer:
    def step(self, loss):
        self.optimizer.zero_grad(set_to_none=False)
        loss.backward()
        self.optimizer.step()
""",
        """
import torch
class Trainer:
    def step(self, loss):
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
""",
    ),
    # 4. positional style is untouched, the keyword only
    invalid(
        """
import torch
opt.zero_grad(set_to_none = False)
""",
        """
import torch
opt.zero_grad()
""",
    ),
    # 5. several optimizers (GAN)
    invalid(
        """
import torch
opt_g.zero_grad(set_to_none=False)
g_loss.backward()
opt_g.step()
opt_d.zero_grad(set_to_none=False)
d_loss.backward()
opt_d.step()
""",
        """
import torch
opt_g.zero_grad()
g_loss.backward()
opt_g.step()
opt_d.zero_grad()
d_loss.backward()
opt_d.step()
""",
    ),
    # 6. Lightning's optimizer accessor
    invalid(
        """
import torch
def training_step(self, batch, batch_idx):
    opt = self.optimizers()
    opt.zero_grad(set_to_none=False)
    self.manual_backward(self.compute_loss(batch))
    opt.step()
""",
        """
import torch
def training_step(self, batch, batch_idx):
    opt = self.optimizers()
    opt.zero_grad()
    self.manual_backward(self.compute_loss(batch))
    opt.step()
""",
    ),
    # 7. a module's zero_grad in a helper
    invalid(
        """
import torch.nn as nn

net = nn.Linear(3, 1)

def clear():
    net.zero_grad(set_to_none=False)
""",
        """
import torch.nn as nn

net = nn.Linear(3, 1)

def clear():
    net.zero_grad()
""",
    ),
    # 8. accumulation loop: zeroing after the k-th step
    invalid(
        """
import torch
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum
    loss.backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
""",
        """
import torch
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum
    loss.backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
    ),
]
