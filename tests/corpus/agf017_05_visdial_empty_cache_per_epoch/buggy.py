import torch
import torch.nn as nn

model = nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
train_dataloader = [torch.randn(3, 4) for _ in range(2)]
for epoch in range(2):
    for i, batch in enumerate(train_dataloader):
        optimizer.zero_grad()
        batch_loss = model(batch).pow(2).mean()
        batch_loss.backward()
        optimizer.step()
    torch.cuda.empty_cache()
print(batch_loss.item())
