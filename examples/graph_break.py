"""Fit a small regression model... that never learns.

Bug (AGF008): `torch.tensor(loss.item(), requires_grad=True)` turns the loss into a brand
new leaf. `backward()` runs without any error, stops at that leaf, and leaves every
parameter's `.grad` at None, so the optimizer never changes the model: the loss stays flat.
Run it: `python examples/graph_break.py`.
"""

import torch
from torch import nn


def make_data(samples=256, features=8, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, features, generator=generator)
    true_w = torch.randn(features, 1, generator=generator)
    return x, x @ true_w + 0.01 * torch.randn(samples, 1, generator=generator)


def fit(model, x, y, epochs=30, lr=0.1):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    criterion = nn.MSELoss()
    for epoch in range(epochs):
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss = torch.tensor(loss.item(), requires_grad=True)
        loss.backward()
        optimizer.step()
        if epoch % 10 == 0 or epoch == epochs - 1:
            print(f"epoch {epoch}: loss {loss.item():.4f}")
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    inputs, targets = make_data()
    final = fit(nn.Linear(8, 1), inputs, targets)
    print("learned" if final < 0.1 else "did not learn")
