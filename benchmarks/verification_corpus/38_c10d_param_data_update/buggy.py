"""pytorch test_c10d.py step_model/update_parameters, minimized: a hand-written SGD
step through param.data.

Report: PR "remove .data from test/distributed/" (pytorch/pytorch#33874); review:
"This one is actually modifying the value of param initially. I think you want:
with torch.no_grad(): param -= param.grad".
"""
import torch
from torch import nn

torch.manual_seed(0)


def step_model(model, input, target):
    model.train()
    output = model(input)
    loss = nn.functional.mse_loss(output, target.to(output.device))
    loss.backward()


def update_parameters(model):
    for param in model.parameters():
        param.data -= param.grad
        param.grad = None


if __name__ == "__main__":
    model = nn.Sequential(nn.Linear(2, 10, bias=False), nn.ReLU(), nn.Linear(10, 4, bias=False))
    input, target = torch.randn(8, 2), torch.randn(8, 4)
    for iteration in range(3):
        step_model(model, input, target)
        update_parameters(model)
    print(sum(p.sum().item() for p in model.parameters()))
