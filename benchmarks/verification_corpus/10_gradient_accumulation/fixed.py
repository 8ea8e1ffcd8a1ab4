"""Gradient accumulation as in the thread "Pytorch gradient accumulation", minimized,
with the model.zero_grad() calls lost: gradients are never reset between updates.

Report: https://discuss.pytorch.org/t/pytorch-gradient-accumulation/55955
"""
import torch
from torch import nn

torch.manual_seed(0)

model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
loss_function = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
accumulation_steps = 2
training_set = [(torch.randn(4, 10), torch.randint(0, 3, (4,))) for _ in range(8)]

model.zero_grad()
for i, (inputs, labels) in enumerate(training_set):
    predictions = model(inputs)
    loss = loss_function(predictions, labels)
    loss = loss / accumulation_steps
    loss.backward()
    if (i + 1) % accumulation_steps == 0:
        optimizer.step()
        model.zero_grad()

print("final weight norm", model[0].weight.norm().item())
