"""pytorch-revgrad functional.py after "Introduce alpha scaling parameter", minimized:
RevGrad gained an alpha input but backward still returns one gradient.

Report: janfreyberg/pytorch-revgrad#4 (the merged version returns
`grad_input, None`). A gradient reversal layer's backward is deliberately not the
derivative of its forward (the identity).
"""
import torch
from torch import nn
from torch.autograd import Function


class RevGrad(Function):
    @staticmethod
    def forward(ctx, input_, alpha_):
        ctx.save_for_backward(input_, alpha_)
        output = input_
        return output.view_as(output)

    @staticmethod
    def backward(ctx, grad_output):
        grad_input = None
        _, alpha_ = ctx.saved_tensors
        if ctx.needs_input_grad[0]:
            grad_input = -grad_output * alpha_
        return None, None


revgrad = RevGrad.apply


class RevGradLayer(nn.Module):
    def __init__(self, alpha=1.0):
        super().__init__()
        self._alpha = torch.tensor(alpha, requires_grad=False)

    def forward(self, input_):
        return revgrad(input_, self._alpha)
