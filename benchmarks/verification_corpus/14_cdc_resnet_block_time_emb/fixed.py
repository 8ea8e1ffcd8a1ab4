"""CDC_compression modules/network_components.py, minimized: ResnetBlock adds the
time embedding in place to an activation autograd saved.

Report: RuntimeError "...modified by an inplace operation"; the reporter's fix:
replace "h += x" with "h = h + x" (buggyyang/CDC_compression#1).
"""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim, dim_out, groups=2):
        super().__init__()
        self.block = nn.Sequential(nn.Conv2d(dim, dim_out, 3, padding=1), nn.GroupNorm(groups, dim_out), nn.Tanh())

    def forward(self, x):
        return self.block(x)


class ResnetBlock(nn.Module):
    def __init__(self, dim, dim_out, time_emb_dim=8):
        super().__init__()
        self.mlp = nn.Sequential(nn.SiLU(), nn.Linear(time_emb_dim, dim_out))
        self.block1 = Block(dim, dim_out)
        self.block2 = Block(dim_out, dim_out)
        self.res_conv = nn.Conv2d(dim, dim_out, 1) if dim != dim_out else nn.Identity()

    def forward(self, x, time_emb):
        h = self.block1(x)
        h = h + self.mlp(time_emb)[:, :, None, None]
        h = self.block2(h)
        return h + self.res_conv(x)
