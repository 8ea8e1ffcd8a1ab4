"""Fit a small linear regression with SGD.

Bug (AGF002): gradients are zeroed once, before the loop, so every `loss.backward()`
adds to the gradients of all previous batches; the steps grow every iteration and the
loss blows up instead of going down.
Run it: `python examples/missing_zero_grad.py`.
"""

import torch
from torch import nn


def make_batches(count, batch_size=16, seed=0):
    generator = torch.Generator().manual_seed(seed)
    true_w = torch.tensor([[2.0], [-3.0], [0.5]])
    batches = []
    for _ in range(count):
        x = torch.randn(batch_size, 3, generator=generator)
        batches.append((x, x @ true_w + 0.1 * torch.randn(batch_size, 1, generator=generator)))
    return batches


def train(model, batches, lr=0.05):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    criterion = nn.MSELoss()
    optimizer.zero_grad()
    for x, y in batches:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    return criterion(model(batches[0][0]), batches[0][1]).item()


if __name__ == "__main__":
    torch.manual_seed(0)
    final = train(nn.Linear(3, 1), make_batches(60))
    print(f"final loss {final:.4f}")
