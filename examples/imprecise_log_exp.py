"""A hand-written log-sum-exp in a classification loss.

Bug (AGF016): `torch.log(torch.sum(torch.exp(logits), dim=1))` overflows for logits
above ~88 (float32): the loss is `inf` and its gradient `nan`.
Run it: `python examples/imprecise_log_exp.py`.
"""

import torch


def cross_entropy(logits, target):
    log_z = torch.log(torch.sum(torch.exp(logits), dim=1))
    return (log_z - logits.gather(1, target[:, None]).squeeze(1)).mean()


if __name__ == "__main__":
    torch.manual_seed(0)
    logits = (torch.randn(4, 5) * 100).requires_grad_()
    target = torch.tensor([0, 1, 2, 3])
    loss = cross_entropy(logits, target)
    loss.backward()
    finite = torch.isfinite(loss).item() and torch.isfinite(logits.grad).all().item()
    print("loss finite" if finite else f"loss {loss.item()}, gradient has nan")
