"""A training script with anomaly mode left on and a cache flush on every batch.

Bug (AGF017): `torch.autograd.set_detect_anomaly(True)` records a stack trace for every
forward op and slows each step several times; `torch.cuda.empty_cache()` on every batch
makes the allocator re-reserve its memory each step. Neither changes any value.
Run it: `python examples/anomaly_mode_or_empty_cache_in_training.py`.
"""

import time

import torch
from torch import nn

torch.autograd.set_detect_anomaly(True)


def train(model, loader):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        torch.cuda.empty_cache()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 1))
    data = [(torch.randn(32, 16), torch.randn(32, 1)) for _ in range(30)]
    start = time.perf_counter()
    final = train(net, data)
    per_step = (time.perf_counter() - start) / len(data) * 1e3
    state = "on" if torch.is_anomaly_enabled() else "off"
    print(f"anomaly mode {state}; final loss {final:.4f}; {per_step:.2f} ms per step")
