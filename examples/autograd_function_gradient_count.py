"""A hand-written LeakyReLU with a configurable slope, trained in a small classifier.

Bug (AGF004): `LeakyReLU.backward` returns one gradient, but `forward` takes two inputs
(`x` and the float `negative_slope`), so the first backward pass raises
`function LeakyReLUBackward returned an incorrect number of gradients (expected 2, got 1)`.
Run it: `python examples/autograd_function_gradient_count.py`.
"""

import torch
from torch import nn


class LeakyReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, negative_slope: float):
        ctx.save_for_backward(x)
        ctx.negative_slope = negative_slope
        return torch.where(x > 0, x, x * negative_slope)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return torch.where(x > 0, grad_output, grad_output * ctx.negative_slope)


class Classifier(nn.Module):
    def __init__(self, negative_slope=0.1):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 3)
        self.negative_slope = negative_slope

    def forward(self, x):
        return self.fc2(LeakyReLU.apply(self.fc1(x), self.negative_slope))


def train(steps=5):
    torch.manual_seed(0)
    model = Classifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    for step in range(steps):
        x = torch.randn(8, 16)
        labels = torch.randint(0, 3, (8,))
        loss = criterion(model(x), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    train()
