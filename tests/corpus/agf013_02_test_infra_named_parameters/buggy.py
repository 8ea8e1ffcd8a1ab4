import torch.nn as nn

model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
for name, param in model.named_parameters():
    param.require_grad = "2." in name
print(sum(p.requires_grad for p in model.parameters()))
