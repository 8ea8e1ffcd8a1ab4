"""The running-mean training loss from the question "Explanation behind the
calculation of training loss in deep learning model", read through loss.data.

Report: https://datascience.stackexchange.com/questions/60613 (the loop uses
`train_loss = train_loss + ((1 / (batch_idx + 1)) * (loss.data - train_loss))`).
"""
import torch
from torch import nn

torch.manual_seed(0)

model = nn.Sequential(nn.Flatten(), nn.Linear(27, 10), nn.ReLU(), nn.Linear(10, 2))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
final_train_loader = [(torch.randn(4, 3, 3, 3), torch.randint(0, 2, (4,))) for _ in range(5)]

for epoch in range(2):
    train_loss = 0.0
    for batch_idx, (data, target) in enumerate(final_train_loader):
        optimizer.zero_grad()
        output = model(data)
        loss = criterion(output, target)
        loss.backward()
        optimizer.step()
        train_loss = train_loss + ((1 / (batch_idx + 1)) * (loss.item() - train_loss))
    print(f"Epoch: {epoch} \tTraining Loss: {train_loss.item():.6f}")
