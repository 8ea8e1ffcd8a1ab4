"""nerf-pytorch's training loop, minimized: anomaly mode left on at import.

Report: "calling this function (line 2 of run_nerf_helpers.py) can somehow slow down
the training process by a large amount (almost 50%)" (yenchenlin/nerf-pytorch#42).
"""
import torch
import torch.nn as nn

torch.set_grad_enabled(False)

img2mse = lambda x, y: torch.mean((x - y) ** 2)


class NeRF(nn.Module):
    def __init__(self, W=16):
        super().__init__()
        self.pts_linears = nn.Sequential(nn.Linear(3, W), nn.ReLU(), nn.Linear(W, W), nn.ReLU())
        self.rgb_linear = nn.Linear(W, 3)

    def forward(self, x):
        return torch.sigmoid(self.rgb_linear(self.pts_linears(x)))


def train():
    torch.manual_seed(0)
    model = NeRF()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    for i in range(4):
        rays, target_s = torch.randn(32, 3), torch.rand(32, 3)
        rgb = model(rays)
        optimizer.zero_grad()
        loss = img2mse(rgb, target_s)
        loss.backward()
        optimizer.step()
        print(f"iter {i}: loss {loss.item():.5f}")


if __name__ == "__main__":
    train()
