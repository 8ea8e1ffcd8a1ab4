"""Fine-tune only the head of a small network, freezing the backbone.

Bug (AGF013): `param.require_grad = False` is a typo; a tensor accepts any new
attribute, so nothing is frozen and the backbone trains too.
Run it: `python examples/require_grad_typo.py`.
"""

import torch
from torch import nn

model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
for name, param in model.named_parameters():
    param.require_grad = name.startswith("2.")


def train(model, loader):
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(trainable, lr=0.1)
    for x, y in loader:
        optimizer.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    before = model[0].weight.detach().clone()
    train(model, [(torch.randn(16, 8), torch.randn(16, 1)) for _ in range(5)])
    print("backbone moved" if not torch.equal(before, model[0].weight) else "backbone frozen")
