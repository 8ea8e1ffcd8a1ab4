"""A custom activation written after the tutorial text "you can cache arbitrary
objects for use in the backward pass using the ctx.save_for_backward method": the
float scale goes into save_for_backward.

Report: "Contradiction in save_for_backward, what is permitted to be saved"
(pytorch/tutorials#2797); the call raises "save_for_backward can only save
variables, but argument 1 is of type float".
"""
import torch
from torch import nn

torch.manual_seed(0)


class ScaledTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale: float):
        y = torch.tanh(x * scale)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * (1 - y * y), None


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(5, 12)
        self.fc2 = nn.Linear(12, 1)

    def forward(self, x):
        return self.fc2(ScaledTanh.apply(self.fc1(x), 0.5))


if __name__ == "__main__":
    net = Net()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    x, y = torch.randn(16, 5), torch.randn(16, 1)
    for step in range(3):
        loss = nn.functional.mse_loss(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(step, loss.item())
