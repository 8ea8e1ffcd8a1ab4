import torch
import torch.nn as nn


def inner_training_loop(model, optimizer, epoch_iterator):
    for step, inputs in enumerate(epoch_iterator):
        loss = model(inputs).pow(2).mean()
        torch.cuda.empty_cache()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return loss.item()


model = nn.Linear(4, 1)
print(inner_training_loop(model, torch.optim.SGD(model.parameters(), lr=0.1), [torch.randn(2, 4) for _ in range(2)]))
