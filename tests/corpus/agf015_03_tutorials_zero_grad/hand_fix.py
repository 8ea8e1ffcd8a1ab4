import torch
import torch.nn as nn

model = nn.Sequential(nn.Flatten(), nn.Linear(16, 10))
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)


def train_loop(dataloader, model, loss_fn, optimizer):
    model.train()
    for batch, (X, y) in enumerate(dataloader):
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


train_loop([(torch.randn(4, 4, 4), torch.randint(0, 10, (4,)))], model, loss_fn, optimizer)
print("done")
