import torch
import torch.nn as nn


def checkpoint(model, path):
    return {"path": path, "state": model.state_dict()}


model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    loss = model(torch.randn(3, 4)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    saved = checkpoint(model, f"step{step}.pt")
print(sorted(saved["state"]))
