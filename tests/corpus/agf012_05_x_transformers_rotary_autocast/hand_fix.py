import torch
from torch import einsum, nn
from torch.amp import autocast


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, use_xpos=False, scale_base=512, interpolation_factor=1.0, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)
        self.interpolation_factor = interpolation_factor

    @autocast("cuda", enabled=False)
    def forward(self, t):
        max_pos = t.max() + 1
        freqs = einsum("i , j -> i j", t.type_as(self.inv_freq), self.inv_freq) / self.interpolation_factor
        freqs = torch.stack((freqs, freqs), dim=-1)
        return freqs.flatten(-2), 1.0


def rotate_half(x):
    x = x.reshape(*x.shape[:-1], -1, 2)
    x1, x2 = x.unbind(dim=-1)
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)


def apply_rotary_pos_emb(t, freqs, scale=1):
    return (t * freqs.cos() * scale) + (rotate_half(t) * freqs.sin() * scale)


if __name__ == "__main__":
    rotary = RotaryEmbedding(8)
    freqs, scale = rotary(torch.arange(6))
    q = torch.randn(2, 6, 8, requires_grad=True)
    out = apply_rotary_pos_emb(q, freqs, scale)
    out.sum().backward()
    print(round(out.sum().item(), 4), round(q.grad.abs().sum().item(), 4))
