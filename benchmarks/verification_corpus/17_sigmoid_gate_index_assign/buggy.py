"""pytorch/pytorch#9391, in a small gating model: an index assignment into a sigmoid
output, which sigmoid saved for its backward.

Report: "backward pass different behaviors with inplace operation": `b = a.sigmoid();
b[1] = 2; b.sum().backward()` raises "...modified by an inplace operation"
(pytorch/pytorch#9391).
"""
import torch
from torch import nn

torch.manual_seed(0)


class GatedMixer(nn.Module):
    def __init__(self, n_experts=3, dim=6):
        super().__init__()
        self.gate = nn.Linear(dim, n_experts)
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(n_experts))

    def forward(self, x):
        gates = self.gate(x).sigmoid()
        gates[:, 0] = 1.0  # the first expert is always on
        outs = torch.stack([expert(x) for expert in self.experts], dim=1)
        return (gates.unsqueeze(-1) * outs).sum(1)


if __name__ == "__main__":
    model = GatedMixer()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(3):
        x, y = torch.randn(5, 6), torch.randn(5, 6)
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(step, loss.item())
