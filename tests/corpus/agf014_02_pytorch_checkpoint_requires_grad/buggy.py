import torch
from torch.utils.checkpoint import checkpoint

m = torch.nn.Linear(4, 3)
x = torch.randn(10, 4)

z1 = checkpoint(lambda _: m(_), x)
print(z1.requires_grad)

z2 = m(x)
print(z2.requires_grad)
