import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
criterion = nn.CrossEntropyLoss()
batches = [(torch.randn(128, 64), torch.randint(0, 10, (128,))) for _ in range(12)]
x_val, y_val = torch.randn(512, 64), torch.randint(0, 10, (512,))

val_history = []
for step, (x, y) in enumerate(batches):
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    val_loss = criterion(model(x_val), y_val)
    val_history.append(val_loss)
print("last validation loss", float(val_history[-1]))
