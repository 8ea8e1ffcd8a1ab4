"""Train a network whose first block is recomputed in backward (activation checkpointing).

Bug (AGF014): `checkpoint` without `use_reentrant` runs the reentrant form, which gives
the block's parameters no gradient when its input (raw data) does not require grad:
only the head trains.
Run it: `python examples/checkpoint_without_use_reentrant.py`.
"""

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Sequential(nn.Linear(8, 32), nn.Tanh())
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        features = checkpoint(self.block, x)
        return self.head(features)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(16, 8), torch.randn(16, 1)
        optimizer.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        optimizer.step()
    print("block trained" if model.block[0].weight.grad is not None else "block got no gradient")
