"""A hand-written Swish activation trained in a small MLP.

Bug (AGF005): `forward` keeps its output on `ctx.out` instead of saving it with
`ctx.save_for_backward`. The output -> grad_fn -> ctx -> output reference cycle keeps
every step's ctx (and the activation) alive until the cyclic garbage collector runs,
and an in-place change of the output before backward would go unnoticed.
Run it: `python examples/tensor_saved_on_ctx.py` (it prints how many ctx objects are
still alive after training with the garbage collector off).
"""

import gc
import weakref

import torch
from torch import nn


class Swish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        sig = torch.sigmoid(x)
        out = x * sig
        ctx.save_for_backward(x)
        ctx.out = out
        ctx.sig = sig
        return out

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (ctx.out + ctx.sig * (1 - ctx.out))


def train(steps=5):
    torch.manual_seed(0)
    fc1, fc2 = nn.Linear(8, 32), nn.Linear(32, 1)
    optimizer = torch.optim.SGD([*fc1.parameters(), *fc2.parameters()], lr=0.05)
    contexts = []
    gc.disable()
    try:
        for step in range(steps):
            x = torch.randn(16, 8)
            hidden = Swish.apply(fc1(x))
            contexts.append(weakref.ref(hidden.grad_fn))
            loss = fc2(hidden).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(f"step {step}: loss {loss.item():.4f}")
            del x, hidden, loss
        alive = sum(ref() is not None for ref in contexts)
    finally:
        gc.enable()
    print(f"ctx objects alive without gc: {alive} of {steps}")
    return alive


if __name__ == "__main__":
    train()
