"""pyro distributions/omt_mvn.py, minimized: _OMTMVNSample keeps the white noise it
drew as a ctx attribute instead of saving it for backward.

Report: "fix ctx usage in omt mvn: never write ctx.blah = blah, memory leaks may
arise" (pyro-ppl/pyro#1049, which moves white and z into save_for_backward).
"""
import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable


class _OMTMVNSample(Function):
    @staticmethod
    def forward(ctx, loc, scale_tril, shape):
        white = loc.new_empty(shape).normal_()
        z = torch.matmul(white, scale_tril.t())
        ctx.save_for_backward(z, white, scale_tril)
        return loc + z

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        z, epsilon, L = ctx.saved_tensors
        g = grad_output.reshape(-1, L.size(0))
        grad_loc = g.sum(0)
        grad_scale_tril = torch.matmul(g.t(), epsilon.reshape(-1, L.size(0))).tril()
        return grad_loc, grad_scale_tril, None
