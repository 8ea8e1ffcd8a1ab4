"""pytorch-memonger's checkpointed ResNet, minimized: each stage is recomputed in backward.

Report: "When out is feed to layer2, it have requires_grad=False so layer1's parameters
can't be optimized. The same problem happen to layer2" (Lyken17/pytorch-memonger#4):
the reentrant checkpoint gives a stage whose input does not require grad no gradient.
"""
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Sequential(nn.Linear(6, 6), nn.Tanh())
        self.layer2 = nn.Sequential(nn.Linear(6, 6), nn.Tanh())
        self.fc = nn.Linear(6, 1)

    def forward(self, x):
        out = checkpoint(self.layer1, x)
        out = checkpoint(self.layer2, out, use_reentrant=False)
        return self.fc(out)


torch.manual_seed(0)
model = ResNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(4, 6), torch.randn(4, 1)
    optimizer.zero_grad()
    loss = (model(x) - y).pow(2).mean()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
