"""Train a small classifier the way old tutorials did, through `.data`.

Bugs (AGF009): the SGD step and the weight clipping mutate parameters through `.data`,
and accuracy is read from `output.data`. `.data` hides every change from autograd's
version counter: had the clipping run before `loss.backward()`, the gradients would have
been silently wrong instead of raising. The fix updates the parameters themselves under
`torch.no_grad()` and reads with `.detach()`; the trained weights are identical.
Run it: `python examples/data_attribute.py`.
"""

import torch
import torch.nn.functional as F
from torch import nn


def make_data(seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(128, 2, generator=generator)
    return x, (x[:, 0] * x[:, 1] > 0).long()


def train(model, x, y, steps=40, lr=0.5, clip=1.0):
    accuracy = 0.0
    for _ in range(steps):
        output = model(x)
        accuracy = (output.data.argmax(1) == y).float().mean().item()
        loss = F.cross_entropy(output, y)
        model.zero_grad()
        loss.backward()
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        for p in model.parameters():
            p.data.clamp_(-clip, clip)
    return accuracy


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))
    accuracy = train(model, *make_data())
    print(f"accuracy {accuracy:.3f}, weight checksum {sum(p.sum().item() for p in model.parameters()):.6f}")
