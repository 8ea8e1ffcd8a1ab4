import torch
from torch import nn


class ShakeShakeFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, branches, training, mode):
        if not training:
            return branches.mean(dim=0)
        weights = ShakeShakeFunction.branch_weights(branches.shape[0], branches.shape[1])
        out = (weights[:, :, None] * branches).sum(dim=0)
        if mode == "keep":
            ctx.save_for_backward(torch.ones(1), weights)
        elif mode == "even":
            ctx.save_for_backward(-torch.ones(1), branches.shape[0] * torch.ones(1).int())
        else:
            ctx.save_for_backward(torch.zeros(1), branches.shape[0] * torch.ones(1).int())
        return out

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.saved_tensors[0] == 1:  # keep the forward weights
            weights = ctx.saved_tensors[1]
        elif ctx.saved_tensors[0] == -1:  # even weights
            n = ctx.saved_tensors[1].item()
            weights = torch.full((n, grad_output.shape[0]), 1.0 / n)
        else:  # fresh random weights
            weights = ShakeShakeFunction.branch_weights(ctx.saved_tensors[1].item(), grad_output.shape[0])
        return weights[:, :, None] * grad_output, None, None

    @staticmethod
    def branch_weights(cardinality, batch_size):
        weights = torch.rand(cardinality, batch_size)
        return weights / weights.sum(dim=0, keepdim=True)


class ShakeShake(nn.Module):
    def __init__(self, mode="shake"):
        super().__init__()
        self.mode = mode

    def forward(self, branches):
        return ShakeShakeFunction.apply(branches, self.training, self.mode)


branches = torch.randn(3, 4, 5, requires_grad=True)
for mode in ("keep", "even", "shake"):
    ShakeShake(mode)(branches).sum().backward()
print(branches.grad.shape)
