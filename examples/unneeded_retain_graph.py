"""Train a small network with a main and an auxiliary loss.

Bug (AGF011): `retain_graph=True` keeps every saved activation of the iteration's graph
alive after backward, although nothing backpropagates through it again; the two losses
share one graph and are backpropagated one after the other instead of as one sum.
Run it: `python examples/unneeded_retain_graph.py`.
"""

import torch
from torch import nn


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 64), nn.Tanh())
        self.main = nn.Linear(64, 1)
        self.aux = nn.Linear(64, 1)

    def forward(self, x):
        features = self.body(x)
        return self.main(features), self.aux(features)


def train(model, train_loader, lr=0.05):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for x, y in train_loader:
        optimizer.zero_grad()
        main_out, aux_out = model(x)
        main_loss = (main_out - y).pow(2).mean()
        aux_loss = 0.1 * (aux_out - y).abs().mean()
        main_loss.backward(retain_graph=True)
        aux_loss.backward()
        optimizer.step()
    return main_loss.item(), model.main.weight.grad.norm().item()


if __name__ == "__main__":
    torch.manual_seed(0)
    loader = [(torch.randn(32, 10), torch.randn(32, 1)) for _ in range(40)]
    final_loss, grad_norm = train(TwoHeads(), loader)
    print(f"final loss {final_loss:.4f}, last grad norm {grad_norm:.4f}")
