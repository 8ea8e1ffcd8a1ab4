"""A gating Function whose backward branches on a saved tensor, minimized.

Report: "this line of code always caused the RuntimeError: Boolean value of Tensor with
more than one value is ambiguous" (youjiangxu/FaMUS#6, grad_operator_layer.py); the
same shape as the founding article's UnsafeRelu.
"""
import torch


class GradGate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return torch.where(x > 0, grad_output, torch.zeros_like(grad_output))


def gated(x):
    return GradGate.apply(x)
