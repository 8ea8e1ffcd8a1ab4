import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Transformer(nn.Module):
    def __init__(self, width=8, layers=2):
        super().__init__()
        self.grad_checkpointing = True
        self.resblocks = nn.ModuleList([nn.Sequential(nn.LayerNorm(width), nn.Linear(width, width)) for _ in range(layers)])

    def forward(self, x):
        for r in self.resblocks:
            if self.grad_checkpointing and not torch.jit.is_scripting():
                x = checkpoint(r, x)
            else:
                x = r(x)
        return x


model = Transformer()
model(torch.randn(3, 8)).sum().backward()
print(model.resblocks[0][1].weight.grad is None)
