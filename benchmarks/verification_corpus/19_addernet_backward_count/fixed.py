"""AdderNet adder.py, minimized: the custom adder Function computes both gradients
but returns only the weight's.

Report: "RuntimeError: function adderBackward returned an incorrect number of
gradients (expected 2, got 1)"; suggested fix: return grad_W_col, grad_X_col
(huawei-noah/AdderNet#21). The backward is deliberately not the true derivative
(full-precision gradient, clipped input gradient, adaptive scaling).
"""
import math

import torch
from torch import nn
from torch.autograd import Function


class adder(Function):
    @staticmethod
    def forward(ctx, W_col, X_col):
        ctx.save_for_backward(W_col, X_col)
        output = -(W_col.unsqueeze(2) - X_col.unsqueeze(0)).abs().sum(1)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        W_col, X_col = ctx.saved_tensors
        grad_W_col = ((X_col.unsqueeze(0) - W_col.unsqueeze(2)) * grad_output.unsqueeze(1)).sum(2)
        grad_W_col = grad_W_col / grad_W_col.norm(p=2).clamp(min=1e-12) * math.sqrt(W_col.size(1) * W_col.size(0)) / 5
        grad_X_col = (-(X_col.unsqueeze(0) - W_col.unsqueeze(2)).clamp(-1, 1) * grad_output.unsqueeze(1)).sum(0)
        return grad_W_col, grad_X_col


class AdderLinear(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) * 0.1)

    def forward(self, x):
        return adder.apply(self.weight, x.t()).t()
