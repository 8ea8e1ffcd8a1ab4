"""VALID / INVALID examples of `agf002_missing_zero_grad` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. the canonical loop
    valid(
        """
import torch

def train(model, train_loader, optimizer, criterion):
    model.train()
    for x, y in train_loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
"""
    ),
    # 2. gradient accumulation done right
    valid(
        """
def train(model, loader, optimizer, criterion, accum_steps=4):
    optimizer.zero_grad(set_to_none=True)
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
"""
    ),
    # 3. model.zero_grad() counts
    valid(
        """
for epoch in range(10):
    for data, target in loader:
        net.zero_grad()
        loss = F.nll_loss(net(data), target)
        loss.backward()
        opt.step()
"""
    ),
    # 4. manual zeroing of parameter grads
    valid(
        """
for x, y in loader:
    for p in model.parameters():
        p.grad = None
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
"""
    ),
    # 5. LBFGS: the closure zeroes; step receives it
    valid(
        """
import torch

optimizer = torch.optim.LBFGS(model.parameters(), lr=1)
for i in range(20):
    def closure():
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        return loss
    optimizer.step(closure)
"""
    ),
    # 6. zeroing in a same-file helper the loop calls
    valid(
        """
def reset(model):
    for p in model.parameters():
        if p.grad is not None:
            p.grad.zero_()

def fit(model, loader, optimizer):
    for x, y in loader:
        reset(model)
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        optimizer.step()
"""
    ),
    # 7. .grad assigned by hand (torch.autograd.grad + manual assignment)
    valid(
        """
import torch

for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    for p in model.parameters():
        p.grad = p.grad.clamp(-1, 1)
    optimizer.step()
"""
    ),
    # 8. DeepSpeed: the engine zeroes inside step()
    valid(
        """
for step, batch in enumerate(data_loader):
    loss = model_engine(batch)
    model_engine.backward(loss)
    model_engine.step()
"""
    ),
    # 9. full-batch gradient descent: accumulate over the whole epoch, then step and zero
    valid(
        """
for epoch in range(100):
    for x, y in loader:
        criterion(model(x), y).backward()
    optimizer.step()
    optimizer.zero_grad()
"""
    ),
    # 10. manual SGD that zeroes (the PyTorch tutorial)
    valid(
        """
import torch

for t in range(500):
    loss = (x @ w - y).pow(2).sum()
    loss.backward()
    with torch.no_grad():
        w -= learning_rate * w.grad
        w.grad.zero_()
"""
    ),
    # 11. Lightning manual optimization: zero_grad through the wrapped optimizer
    valid(
        """
class Lit(pl.LightningModule):
    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        for _ in range(3):
            opt.zero_grad()
            loss = self.compute_loss(batch)
            self.manual_backward(loss)
            opt.step()
"""
    ),
    # 12. hyper-parameter search: a fresh model and optimizer every iteration
    valid(
        """
for lr in [1e-1, 1e-2, 1e-3]:
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    results[lr] = evaluate(model)
"""
    ),
    # 13. AMP with the zeroing written as set_to_none on the model
    valid(
        """
for batch in loader:
    with torch.autocast("cuda"):
        loss = model(batch).mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    model.zero_grad(set_to_none=True)
"""
    ),
    # 14. `step` replaced (types.MethodType) by a same-file function that zeroes after stepping
    valid(
        """
import types

class NoisyStep:
    def attach(self, optimizer):
        inner_step = optimizer.step

        def noisy_step(opt, closure=None):
            for group in opt.param_groups:
                for p in group["params"]:
                    p.grad += 0.01 * torch.randn_like(p.grad)
            inner_step(closure)
            opt.zero_grad()

        optimizer.step = types.MethodType(noisy_step, optimizer)

def fit(net, batches, optimizer):
    for inputs, labels in batches:
        loss = F.cross_entropy(net(inputs), labels)
        loss.backward()
        optimizer.step()
"""
    ),
    # 15. a helper that scales gradients to zero (`mul_(0)`) zeroes them
    valid(
        """
def wipe(optimizer):
    for group in optimizer.param_groups:
        for param in group["params"]:
            if param.grad is not None:
                param.grad.data.mul_(0)

for src, tgt in pairs:
    loss = seq2seq(src, tgt).sum()
    loss.backward()
    optimizer.step()
    wipe(optimizer)
"""
    ),
    # the same split into methods, but the epoch loop zeroes before each step call
    valid(
        """
import torch
from torch import nn


class Finetuner:
    def __init__(self, model, batches):
        self.model = model
        self.batches = batches
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def compute_and_backprop(self, x, y):
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        return loss

    def step(self, batch):
        loss = self.compute_and_backprop(*batch)
        self.optimizer.step()
        return loss.item()

    def fit(self):
        for batch in self.batches:
            self.optimizer.zero_grad()
            print(self.step(batch))
"""
    ),
]

INVALID = [
    # 1. zeroed once, before the loop
    invalid(
        """
import torch

def train(model, train_loader, optimizer, criterion):
    optimizer.zero_grad()
    for x, y in train_loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
""",
        """
import torch

def train(model, train_loader, optimizer, criterion):
    optimizer.zero_grad()
    for x, y in train_loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
""",
    ),
    # 2. zeroing once per epoch, outside the batch loop
    invalid(
        """
for epoch in range(args.epochs):
    model.zero_grad()
    for batch_idx, (data, target) in enumerate(train_loader):
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        opt.step()  # update
        if batch_idx % 10 == 0:
            print(loss.item())
""",
        """
for epoch in range(args.epochs):
    model.zero_grad()
    for batch_idx, (data, target) in enumerate(train_loader):
        opt.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        opt.step()  # update
        if batch_idx % 10 == 0:
            print(loss.item())
""",
    ),
    # 3. gradient accumulation: zero inside the `if`, after the step
    invalid(
        """
def train(model, loader, optimizer, criterion, accumulation_steps):
    for i, (inputs, labels) in enumerate(loader):
        loss = criterion(model(inputs), labels) / accumulation_steps
        loss.backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            scheduler.step()
""",
        """
def train(model, loader, optimizer, criterion, accumulation_steps):
    for i, (inputs, labels) in enumerate(loader):
        loss = criterion(model(inputs), labels) / accumulation_steps
        loss.backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
            scheduler.step()
""",
    ),
    # 4. a trainer class with AMP: after scaler.update()
    invalid(
        """
import torch

class Trainer:
    def train_epoch(self):
        for batch in self.train_loader:
            with torch.autocast("cuda"):
                loss = self.model(**batch).loss
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
""",
        """
import torch

class Trainer:
    def train_epoch(self):
        for batch in self.train_loader:
            self.optimizer.zero_grad()
            with torch.autocast("cuda"):
                loss = self.model(**batch).loss
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
""",
    ),
    # 5. manual SGD without zeroing: reset the grads the loop updates
    invalid(
        """
import torch

w = torch.randn(3, 1, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
for step in range(100):
    loss = ((x @ w + b - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= lr * w.grad
        b -= lr * b.grad
""",
        """
import torch

w = torch.randn(3, 1, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
for step in range(100):
    loss = ((x @ w + b - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= lr * w.grad
        b -= lr * b.grad
        w.grad = None
        b.grad = None
""",
    ),
    # 6. manual update over parameters()
    invalid(
        """
import torch

def sgd_epoch(model, loader, lr):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p.sub_(lr * p.grad)
""",
        """
import torch

def sgd_epoch(model, loader, lr):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p.sub_(lr * p.grad)
                p.grad = None
""",
    ),
    # 7. one backward, two optimizers (encoder/decoder): zero both after the last step
    invalid(
        """
while step < max_steps:
    x = next(batches)
    recon = decoder(encoder(x))
    loss = (recon - x).abs().mean()
    loss.backward()
    enc_optimizer.step()
    dec_optimizer.step()
    step += 1
""",
        """
while step < max_steps:
    x = next(batches)
    recon = decoder(encoder(x))
    loss = (recon - x).abs().mean()
    loss.backward()
    enc_optimizer.step()
    dec_optimizer.step()
    enc_optimizer.zero_grad()
    dec_optimizer.zero_grad()
    step += 1
""",
    ),
    # 8. a GAN without zeroing: reported, not fixed (which grads each step sees is a choice)
    invalid(
        """
for real in loader:
    fake = G(torch.randn(real.size(0), 100))
    d_loss = bce(D(real), ones) + bce(D(fake.detach()), zeros)
    d_loss.backward()
    opt_d.step()
    g_loss = bce(D(fake), ones)
    g_loss.backward()
    opt_g.step()
"""
    ),
    # 9. step in both branches of an if/else
    invalid(
        """
for it, (x, y) in enumerate(loader):
    loss = criterion(net(x), y)
    loss.backward()
    if it < warmup:
        optimizer.step()
    else:
        clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()
""",
        """
for it, (x, y) in enumerate(loader):
    loss = criterion(net(x), y)
    loss.backward()
    if it < warmup:
        optimizer.step()
        optimizer.zero_grad()
    else:
        clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
""",
    ),
    # 10. a same-file helper that only clips gradients in place does not zero them
    invalid(
        """
def clip_gradient(optimizer, grad_clip):
    for group in optimizer.param_groups:
        for param in group["params"]:
            if param.grad is not None:
                param.grad.data.clamp_(-grad_clip, grad_clip)

optimizer.zero_grad()
for step, batch in enumerate(batches):
    loss = criterion(classifier(batch.text), batch.label)
    loss.backward()
    clip_gradient(optimizer, 0.5)
    optimizer.step()
""",
        """
def clip_gradient(optimizer, grad_clip):
    for group in optimizer.param_groups:
        for param in group["params"]:
            if param.grad is not None:
                param.grad.data.clamp_(-grad_clip, grad_clip)

optimizer.zero_grad()
for step, batch in enumerate(batches):
    optimizer.zero_grad()
    loss = criterion(classifier(batch.text), batch.label)
    loss.backward()
    clip_gradient(optimizer, 0.5)
    optimizer.step()
""",
    ),
    # the step is a method the epoch loop calls; the backward is in another method, and
    # the only zeroing runs once, before the loop
    invalid(
        """
import torch
from torch import nn


class Finetuner:
    def __init__(self, model, batches):
        self.model = model
        self.batches = batches
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def compute_and_backprop(self, x, y):
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        return loss

    def step(self, batch):
        loss = self.compute_and_backprop(*batch)
        self.optimizer.step()
        return loss.item()

    def fit(self):
        self.optimizer.zero_grad()
        for batch in self.batches:
            print(self.step(batch))
""",
        """
import torch
from torch import nn


class Finetuner:
    def __init__(self, model, batches):
        self.model = model
        self.batches = batches
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def compute_and_backprop(self, x, y):
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        return loss

    def step(self, batch):
        loss = self.compute_and_backprop(*batch)
        self.optimizer.step()
        self.optimizer.zero_grad()
        return loss.item()

    def fit(self):
        self.optimizer.zero_grad()
        for batch in self.batches:
            print(self.step(batch))
""",
    ),
]
