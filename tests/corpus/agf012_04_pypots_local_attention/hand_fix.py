import torch
import torch.nn as nn
import torch.nn.functional as F


def look_around(x, backward=1, forward=0, pad_value=-1, dim=2):
    t = x.shape[1]
    dims = (len(x.shape) - dim) * (0, 0)
    padded_x = F.pad(x, (*dims, backward, forward), value=pad_value)
    tensors = [padded_x[:, ind : (ind + t), ...] for ind in range(forward + backward + 1)]
    return torch.cat(tensors, dim=dim)


class LocalAttention(nn.Module):
    def __init__(self, window_size, look_backward=1, look_forward=0, dropout=0.0):
        super().__init__()
        self.window_size = window_size
        self.look_backward = look_backward
        self.look_forward = look_forward
        self.dropout = nn.Dropout(dropout)

    def forward(self, q, k, v):
        b, n, d = q.shape
        w = self.window_size
        windows = n // w
        bq, bk, bv = (t.reshape(b, windows, w, d) for t in (q, k, v))
        bk = look_around(bk, backward=self.look_backward, forward=self.look_forward)
        bv = look_around(bv, backward=self.look_backward, forward=self.look_forward)
        with torch.amp.autocast("cuda", enabled=False):
            sim = torch.einsum("b h i e, b h j e -> b h i j", bq.float(), bk.float()) * (d**-0.5)
        attn = sim.softmax(dim=-1)
        attn = self.dropout(attn)
        out = torch.einsum("b h i j, b h j e -> b h i e", attn, bv)
        return out.reshape(b, n, d)


if __name__ == "__main__":
    attn = LocalAttention(window_size=4)
    q = torch.randn(2, 8, 6, requires_grad=True)
    out = attn(q, q, q)
    out.sum().backward()
    print(f"out={out.sum().item():.4f} grad={q.grad.abs().sum().item():.4f}")
