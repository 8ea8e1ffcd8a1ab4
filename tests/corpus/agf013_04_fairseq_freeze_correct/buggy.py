import torch.nn as nn


def freeze_param_grad_zero(model):
    for name, param in model.named_parameters():
        if "fc1" in name or "fc2" in name:
            param.requires_grad = False
    return model


model = nn.Module()
model.fc1 = nn.Linear(4, 4)
model.out = nn.Linear(4, 2)
print(sum(p.requires_grad for p in freeze_param_grad_zero(model).parameters()))
