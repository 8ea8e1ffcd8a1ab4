"""Self-attention whose padding mask is applied through `.data`, on a tiny binary classifier.

The attention weights of padded keys are zeroed with `attn.data.masked_fill_(...)` after
the softmax, which saved its output for backward: the backward sees the masked weights and
computes gradients of a function the forward did not compute (silently wrong). The
sinusoid position table is built in numpy and wrapped as a float32 tensor, as the
original code does, and the labels are made float32 with `.float()` for the BCE loss.
"""

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

PAD = 0


def sinusoid_table(n_position, d_hid):
    position = np.arange(n_position)[:, None]
    div = np.power(10000, 2 * (np.arange(d_hid) // 2) / d_hid)
    table = position / div
    table[:, 0::2] = np.sin(table[:, 0::2])
    table[:, 1::2] = np.cos(table[:, 1::2])
    return torch.FloatTensor(table)


class SelfAttentionClassifier(nn.Module):
    def __init__(self, vocab=30, d_model=16, max_len=10):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.register_buffer("position", sinusoid_table(max_len, d_model))
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.out = nn.Linear(d_model, 1)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position[: tokens.size(1)]
        scores = self.q(x) @ self.k(x).transpose(1, 2) / x.size(-1) ** 0.5
        attn = torch.softmax(scores, dim=-1)
        attn.data.masked_fill_((tokens == PAD).unsqueeze(1), 0.0)
        return torch.sigmoid(self.out((attn @ self.v(x)).mean(1))).squeeze(1)


def main():
    torch.manual_seed(0)
    tokens = torch.randint(1, 30, (16, 10))
    tokens[:, 7:] = PAD
    labels = torch.randint(0, 2, (16,)).float()
    model = SelfAttentionClassifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = F.binary_cross_entropy(model(tokens), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
