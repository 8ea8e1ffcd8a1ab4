"""pytorch/pytorch#5569, as a working Function: the output (and the inputs) are kept
as ctx attributes, so every ctx lives until the cyclic garbage collector runs.

Report: "torch.autograd.Function memory leak" with `ctx.output_features = ...;
return ctx.output_features`; "you should use save_for_backward for inputs and
outputs, or you will face leaks" (pytorch/pytorch#5569).
"""
import torch
from torch import nn


class ScaleFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_features, weight):
        ctx.input_features = input_features
        ctx.weight = weight
        ctx.output_features = input_features * weight
        return ctx.output_features

    @staticmethod
    def backward(ctx, grad_output):
        grad_input = grad_output * ctx.weight
        grad_weight = (grad_output * ctx.input_features).sum(0)
        return grad_input, grad_weight


class ChannelScale(nn.Module):
    def __init__(self, channels=6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))

    def forward(self, x):
        return ScaleFunction.apply(x, self.weight)
