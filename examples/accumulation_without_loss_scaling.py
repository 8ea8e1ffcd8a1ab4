"""Gradient accumulation over 4 micro-batches whose loss is never divided by 4.

Bug (AGF019): `loss.backward()` runs on every micro-batch and `optimizer.step()` on
every 4th, so the step sees the sum of 4 mean-loss gradients: 4 times the gradient of
the big batch the accumulation stands for (the learning rate is effectively 4x).
Run it: `python examples/accumulation_without_loss_scaling.py`.
"""

import copy

import torch
from torch import nn


def big_batch_gradient(model, criterion, window):
    """The gradient the accumulation stands for: one mean loss over the whole window."""
    reference = copy.deepcopy(model)
    inputs = torch.cat([x for x, _ in window])
    targets = torch.cat([y for _, y in window])
    criterion(reference(inputs), targets).backward()
    return reference.weight.grad


def train(model, loader, accum_steps):
    criterion = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    expected = big_batch_gradient(model, criterion, loader[:accum_steps])
    ratios = []
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        if (i + 1) % accum_steps == 0:
            if not ratios:
                ratios.append((model.weight.grad.norm() / expected.norm()).item())
            optimizer.step()
            optimizer.zero_grad()
    return ratios[0]


if __name__ == "__main__":
    torch.manual_seed(0)
    net = nn.Linear(8, 1)
    data = [(torch.randn(16, 8), torch.randn(16, 1)) for _ in range(8)]
    ratio = train(net, data, accum_steps=4)
    if abs(ratio - 1) < 1e-4:
        print("first step's gradient matches the big batch's")
    else:
        print(f"first step's gradient is {ratio:.2f}x the big batch's")
