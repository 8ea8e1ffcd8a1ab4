"""A recurrent tagger with a learned per-step bias added to the hidden state in place.

`h += self.step_bias[t]` writes into tanh's output, which tanh saved for its backward:
"one of the variables needed for gradient computation has been modified by an inplace
operation". The step bias starts at zero, as such biases usually do.
"""

import torch
import torch.nn.functional as F
from torch import nn


class StepBiasRNN(nn.Module):
    def __init__(self, n_in=4, hidden=12, steps=6, n_out=3):
        super().__init__()
        self.inp = nn.Linear(n_in, hidden)
        self.rec = nn.Linear(hidden, hidden, bias=False)
        self.step_bias = nn.Parameter(torch.zeros(steps, hidden))
        self.out = nn.Linear(hidden, n_out)

    def forward(self, x):
        h = x.new_zeros(x.size(0), self.rec.in_features)
        for t in range(x.size(1)):
            h = torch.tanh(self.inp(x[:, t]) + self.rec(h))
            h = h + 0 * self.step_bias[t]
        return self.out(h)


def main():
    torch.manual_seed(0)
    model = StepBiasRNN()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    x, y = torch.randn(24, 6, 4), torch.randint(0, 3, (24,))
    for epoch in range(4):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
