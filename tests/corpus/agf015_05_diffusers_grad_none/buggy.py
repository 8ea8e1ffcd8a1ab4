import torch
import torch.nn as nn

unet = nn.Linear(4, 4)
optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-4)
for step in range(2):
    loss = unet(torch.randn(2, 4)).pow(2).mean()
    loss.backward()
    optimizer.step()
    for param in unet.parameters():
        param.grad = None
print("done")
