import torch
import torch.nn.functional as F
from torch import nn


class LMModel3(nn.Module):
    def __init__(self, vocab_sz, n_hidden):
        super().__init__()
        self.i_h = nn.Embedding(vocab_sz, n_hidden)
        self.h_h = nn.Linear(n_hidden, n_hidden)
        self.h_o = nn.Linear(n_hidden, vocab_sz)
        self.h = 0

    def forward(self, x):
        for i in range(3):
            self.h = self.h + self.i_h(x[:, i])
            self.h = F.relu(self.h_h(self.h))
        out = self.h_o(self.h)
        self.h = self.h.detach()
        return out

    def reset(self):
        self.h = 0


if __name__ == "__main__":
    vocab_sz, bs = 30, 8
    model = LMModel3(vocab_sz, 16)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = [(torch.randint(0, vocab_sz, (bs, 3)), torch.randint(0, vocab_sz, (bs,))) for _ in range(6)]
    for epoch in range(2):
        model.reset()
        for xb, yb in batches:
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            opt.zero_grad()
        print(epoch, round(loss.item(), 4))
