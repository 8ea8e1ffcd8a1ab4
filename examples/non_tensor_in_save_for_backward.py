"""A custom scaled-tanh activation inside a small regression model.

Bug (AGF007): `forward` passes the Python float `scale` to `ctx.save_for_backward`,
which takes tensors only: the first forward raises
`TypeError: save_for_backward can only save variables, but argument 1 is of type float`.
Run it: `python examples/non_tensor_in_save_for_backward.py`.
"""

import torch
from torch import nn


class ScaledTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale: float):
        y = torch.tanh(x)
        ctx.save_for_backward(y, scale)
        return y * scale

    @staticmethod
    def backward(ctx, grad_output):
        y, scale = ctx.saved_tensors
        return grad_output * scale * (1 - y * y), None


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 1)

    def forward(self, x):
        return self.fc2(ScaledTanh.apply(self.fc1(x), 1.7))


def train(steps=5):
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(steps):
        x = torch.randn(32, 8)
        y = x.sum(dim=1, keepdim=True)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    train()
