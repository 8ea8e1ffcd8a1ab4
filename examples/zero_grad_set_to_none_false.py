"""A training loop that zeroes gradients by filling them with zeros.

Bug (AGF015): `zero_grad(set_to_none=False)` runs a fill over every gradient each step
and keeps the gradient memory allocated; the default (`None`) is cheaper.
Run it: `python examples/zero_grad_set_to_none_false.py`.
"""

import torch
from torch import nn


def train(model, loader):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for x, y in loader:
        optimizer.zero_grad(set_to_none=False)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
    print(f"final loss {train(net, [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(20)]):.4f}")
