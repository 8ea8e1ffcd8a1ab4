"""Train a small classifier, then validate it every epoch.

Bug (AGF001): the validation loop runs the model while autograd records, so every
logit kept in `all_logits` keeps its whole graph (activations included) alive.
Run it: `python examples/eval_forward_without_no_grad.py`.
"""

import torch
from torch import nn


def make_batches(count, batch_size=32, features=20, classes=4, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(batch_size, features, generator=generator), torch.randint(0, classes, (batch_size,), generator=generator))
        for _ in range(count)
    ]


def fit(model, train_loader, val_loader, epochs=2, lr=0.05):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        model.train()
        for inputs, targets in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            optimizer.step()

        model.eval()
        all_logits = []
        for inputs, targets in val_loader:
            all_logits.append(model(inputs))
        accuracy = (torch.cat(all_logits).argmax(1) == torch.cat([t for _, t in val_loader])).float().mean()
        print(f"epoch {epoch}: val accuracy {accuracy:.3f}")
    return model


if __name__ == "__main__":
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4))
    fit(net, make_batches(20), make_batches(10, seed=1))
