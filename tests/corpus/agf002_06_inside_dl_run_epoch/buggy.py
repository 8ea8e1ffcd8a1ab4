import time

import torch
import torch.nn as nn


def moveTo(obj, device):
    if isinstance(obj, (list, tuple)):
        return type(obj)(moveTo(x, device) for x in obj)
    if hasattr(obj, "to"):
        return obj.to(device)
    return obj


def run_epoch(model, optimizer, data_loader, loss_func, device, results, score_funcs, prefix="", desc=None):
    running_loss = []
    y_true = []
    y_pred = []
    start = time.time()
    for inputs, labels in data_loader:
        inputs = moveTo(inputs, device)
        labels = moveTo(labels, device)

        y_hat = model(inputs)
        loss = loss_func(y_hat, labels)

        if model.training:
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()

        running_loss.append(loss.item())

        if len(score_funcs) > 0 and isinstance(labels, torch.Tensor):
            labels = labels.detach().cpu().numpy()
            y_hat = y_hat.detach().cpu().numpy()
            y_true.extend(labels.tolist())
            y_pred.extend(y_hat.argmax(axis=1).tolist())
    end = time.time()
    results[prefix + " loss"].append(sum(running_loss) / len(running_loss))
    for name, score_func in score_funcs.items():
        results[prefix + " " + name].append(score_func(y_true, y_pred))
    return end - start


if __name__ == "__main__":
    model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = [(torch.randn(8, 2), torch.randint(0, 2, (8,))) for _ in range(5)]
    results = {"train loss": [], "train Acc": []}

    def acc(y_true, y_pred):
        return sum(int(a == b) for a, b in zip(y_true, y_pred)) / len(y_true)

    model.train()
    for epoch in range(3):
        run_epoch(model, optimizer, loader, nn.CrossEntropyLoss(), "cpu", results, {"Acc": acc}, prefix="train")
    print([round(v, 4) for v in results["train loss"]], [round(v, 4) for v in results["train Acc"]])
