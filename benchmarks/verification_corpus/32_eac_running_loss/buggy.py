"""Erasing-Attention-Consistency src/main.py, minimized: the training loop sums loss
tensors (and counts correct predictions) across the epoch.

Report: "You have a memory leak during training ... For solving this problem, I used
.detach()" (zyh-uaiaaaa/Erasing-Attention-Consistency#11).
"""
import torch
from torch import nn

torch.manual_seed(0)

model = nn.Sequential(nn.Flatten(), nn.Linear(48, 16), nn.ReLU(), nn.Linear(16, 7))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
train_loader = [(torch.randn(4, 3, 4, 4), torch.randint(0, 7, (4,))) for _ in range(5)]

for epoch in range(2):
    running_loss = 0.0
    correct_sum = 0
    iter_cnt = 0
    model.train()
    for imgs, labels in train_loader:
        iter_cnt += 1
        optimizer.zero_grad()
        output = model(imgs)
        loss = criterion(output, labels)
        loss.backward()
        optimizer.step()
        running_loss += loss
        _, predicts = torch.max(output, 1)
        correct_num = torch.eq(predicts, labels).sum()
        correct_sum += correct_num
    running_loss = running_loss / iter_cnt
    acc = correct_sum.float() / (iter_cnt * 4)
    print(f"[Epoch {epoch}] Training accuracy: {acc:.4f}. Loss: {running_loss:.3f}")
