"""A training loop that never zeroes gradients, then logs each layer's gradient norm
after the loop (what a `track_grad_norm` flag reports)."""

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
data = [(torch.randn(32, 8), torch.randn(32, 1)) for _ in range(6)]

for epoch in range(2):
    for x, y in data:
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")

for name, param in model.named_parameters():
    print(f"grad norm {name}: {param.grad.norm():.4f}")
