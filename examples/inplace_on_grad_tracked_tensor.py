"""Train a tiny gated regressor with hand-written SGD.

Bugs (AGF003):
- `forward` scales the sigmoid gate in place (`gate.mul_(2.0)`); sigmoid saved its
  output for backward, so `loss.backward()` raises "one of the variables needed for
  gradient computation has been modified by an inplace operation".
- the SGD step updates parameters in place outside `torch.no_grad()`, which raises
  "a leaf Variable that requires grad is being used in an in-place operation".
`autograd-fix --apply --unsafe-fixes` rewrites the first out of place and wraps the second
in `with torch.no_grad():`; the script then trains.
Run it: `python examples/inplace_on_grad_tracked_tensor.py`.
"""

import torch
from torch import nn


class GatedRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(4, 4)
        self.out = nn.Linear(4, 1)

    def forward(self, x):
        gate = torch.sigmoid(self.gate(x))
        gate.mul_(2.0)
        return self.out(gate * x)


def train(model, steps=50, lr=0.05):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(64, 4, generator=generator)
    y = x.sum(dim=1, keepdim=True)
    for _ in range(steps):
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        for p in model.parameters():
            p -= lr * p.grad
            p.grad = None
    return nn.functional.mse_loss(model(x), y).item()


if __name__ == "__main__":
    torch.manual_seed(0)
    print(f"final loss {train(GatedRegressor()):.4f}")
