import torch


def inv_softplus(x):
    return torch.log(torch.expm1(x))


print(inv_softplus(torch.tensor([1e-7, 1.0, 5.0])))
