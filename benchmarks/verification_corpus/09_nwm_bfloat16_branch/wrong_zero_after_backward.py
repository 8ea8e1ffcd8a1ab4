"""nwm train.py, minimized: train_step zeroes gradients only on the float32 path, so
with bfloat16 enabled they accumulate silently.

Report: "Missing opt.zero_grad() when bfloat16 is enabled causes silent gradient
accumulation" (facebookresearch/nwm#16).
"""
import torch
from torch import nn

torch.manual_seed(0)


def train_step(model, opt, x, y, bfloat_enable):
    if bfloat_enable:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.mse_loss(model(x).float(), y)
        loss.backward()
        opt.zero_grad()
        opt.step()
    else:
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return loss.item()


if __name__ == "__main__":
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(5):
        x, y = torch.randn(4, 8), torch.randn(4, 8)
        print(step, train_step(model, opt, x, y, bfloat_enable=True))
