from dataclasses import dataclass

import torch
from torch.utils.checkpoint import checkpoint


@dataclass
class Output:
    hidden: torch.Tensor


lin = torch.nn.Linear(4, 4)


def block(x):
    return Output(lin(x))


out = checkpoint(block, torch.randn(2, 4), use_reentrant=False)
out.hidden.sum().backward()
print(lin.weight.grad is not None)
