"""TSAN Train/model/tsan.py, minimized: `out = x` aliases a tensor autograd saved,
and the residual add then modifies it in place.

Report: RuntimeError "one of the variables needed for gradient computation has been
modified by an inplace operation"; fix "line 103: out = x --> out = x.clone()"
(Jee-King/TSAN#3).
"""
import torch
from torch import nn

torch.manual_seed(0)


class AttentionFusion(nn.Module):
    def __init__(self, channels=8):
        super().__init__()
        self.head = nn.Conv2d(3, channels, 3, padding=1)
        self.body = nn.Conv2d(channels, channels, 3, padding=1)
        self.tail = nn.Conv2d(channels, 3, 3, padding=1)

    def forward(self, x):
        x = torch.sigmoid(self.head(x))
        out = x
        return self.tail(out)


if __name__ == "__main__":
    model = AttentionFusion()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(3):
        lr_img, hr_img = torch.randn(2, 3, 12, 12), torch.randn(2, 3, 12, 12)
        loss = nn.functional.l1_loss(model(lr_img), hr_img)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(step, loss.item())
