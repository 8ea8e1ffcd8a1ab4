import math

import torch
import torch.nn as nn


def sinusoidal_embedding_1d(dim, position):
    # preprocess
    assert dim % 2 == 0
    half = dim // 2
    position = position.type(torch.float64)

    # calculation
    sinusoid = torch.outer(position, torch.pow(10000, -torch.arange(half).to(position).div(half)))
    x = torch.cat([torch.cos(sinusoid), torch.sin(sinusoid)], dim=1)
    return x


@torch.amp.autocast("cuda", enabled=False)
def rope_params(max_seq_len, dim, theta=10000):
    assert dim % 2 == 0
    freqs = torch.outer(
        torch.arange(max_seq_len),
        1.0 / torch.pow(theta, torch.arange(0, dim, 2).to(torch.float64).div(dim)))
    freqs = torch.polar(torch.ones_like(freqs), freqs)
    return freqs


class WanTimeEmbedding(nn.Module):
    def __init__(self, freq_dim=16, dim=8):
        super().__init__()
        self.freq_dim = freq_dim
        self.time_embedding = nn.Sequential(nn.Linear(freq_dim, dim), nn.SiLU(), nn.Linear(dim, dim))

    def forward(self, t):
        with torch.amp.autocast("cuda", dtype=torch.float32):
            e = self.time_embedding(sinusoidal_embedding_1d(self.freq_dim, t).float())
        return e


if __name__ == "__main__":
    freqs = rope_params(6, 8)
    e = WanTimeEmbedding()(torch.tensor([0.0, 500.0, 999.0]))
    print(tuple(freqs.shape), round(float(freqs.real.sum()), 4), round(float(e.sum()), 4), math.isfinite(float(e.sum())))
