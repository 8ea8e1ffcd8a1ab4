"""semseg train.py, minimized: validate() runs the model with autograd recording.

Report: "out of memory" during validation (hszhao/semseg#60).
"""
import time

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class AverageMeter:
    def __init__(self):
        self.sum, self.count, self.avg = 0.0, 0, 0.0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


class PSPNetLite(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.layer0 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.cls = nn.Conv2d(8, classes, 1)

    def forward(self, x):
        return self.cls(self.layer0(x))


def train(train_loader, model, criterion, optimizer):
    model.train()
    for input, target in train_loader:
        output = model(input)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def validate(val_loader, model, criterion):
    loss_meter = AverageMeter()
    correct, total = 0, 0
    model.eval()
    end = time.time()
    for i, (input, target) in enumerate(val_loader):
        with torch.no_grad():
            output = model(input)
        loss = criterion(output, target)
        loss_meter.update(loss.item(), input.size(0))
        pred = output.max(1)[1]
        correct += (pred == target).sum().item()
        total += target.numel()
    batch_time = time.time() - end
    return loss_meter.avg, correct / total


def main():
    model = PSPNetLite()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    train_loader = [(torch.randn(4, 3, 16, 16), torch.randint(0, 4, (4, 16, 16))) for _ in range(3)]
    # the last validation batch is smaller, as with drop_last=False
    val_loader = [(torch.randn(n, 3, 16, 16), torch.randint(0, 4, (n, 16, 16))) for n in (4, 4, 1)]
    for epoch in range(2):
        train(train_loader, model, criterion, optimizer)
        loss_val, acc_val = validate(val_loader, model, criterion)
        print(f"epoch {epoch}: val loss {loss_val:.4f} acc {acc_val:.4f}")


if __name__ == "__main__":
    main()
