import torch
import torch.nn as nn


class FreezeConfig:
    def __init__(self, layers):
        self.layers = layers
        self.require_grad = False


backbone = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
cfg = FreezeConfig(["0"])
cfg.require_grad = True
param_groups = [{"params": [p], "freeze": not cfg.require_grad} for p in backbone.parameters()]
optimizer = torch.optim.SGD(param_groups, lr=0.1)
print(len(optimizer.param_groups))
