"""pytorch-deep-learning 04_pytorch_custom_datasets, minimized: train_step sums the
loss tensors, so the returned train_loss is a tensor with a graph and matplotlib's
numpy() call fails when plotting the results.

Report: "results['train_loss'] contained list of tensors with gradient ... I had
missed the item() in my train and test functions" (mrdbourke/pytorch-deep-learning#583).
"""
import torch
from torch import nn

torch.manual_seed(0)


def train_step(model, dataloader, loss_fn, optimizer):
    model.train()
    train_loss, train_acc = 0, 0
    for batch, (X, y) in enumerate(dataloader):
        y_pred = model(X)
        loss = loss_fn(y_pred, y)
        train_loss += loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        y_pred_class = torch.argmax(torch.softmax(y_pred, dim=1), dim=1)
        train_acc += (y_pred_class == y).sum().item() / len(y_pred)
    train_loss = train_loss / len(dataloader)
    train_acc = train_acc / len(dataloader)
    return train_loss, train_acc


if __name__ == "__main__":
    model_0 = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10), nn.ReLU(), nn.Linear(10, 3))
    dataloader = [(torch.randn(4, 3, 8, 8), torch.randint(0, 3, (4,))) for _ in range(4)]
    optimizer = torch.optim.Adam(model_0.parameters(), lr=1e-3)
    results = {"train_loss": [], "train_acc": []}
    for epoch in range(2):
        train_loss, train_acc = train_step(model_0, dataloader, nn.CrossEntropyLoss(), optimizer)
        results["train_loss"].append(train_loss)
        results["train_acc"].append(train_acc)
    print(results)
