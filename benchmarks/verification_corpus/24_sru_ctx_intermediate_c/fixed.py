"""sru custom op, minimized: the cell states c of an elementwise recurrence are an
intermediate the backward needs, kept as a ctx attribute.

Report: "fix a potential memory leak in custom op: some intermediate tensors (e.g. c)
are stored in ctx without using ctx.save_for_backward()" (asappresearch/sru#171).
"""
import torch
from torch.autograd import Function


class ElementwiseRecurrence(Function):
    """h_t = tanh(c_t), c_t = f_t * c_{t-1} + (1 - f_t) * x_t over the first dimension."""

    @staticmethod
    def forward(ctx, f, x, c0):
        cs = []
        c_prev = c0
        for t in range(f.size(0)):
            c_prev = f[t] * c_prev + (1 - f[t]) * x[t]
            cs.append(c_prev)
        c = torch.stack(cs)
        ctx.save_for_backward(f, x, c0, c)
        return torch.tanh(c)

    @staticmethod
    def backward(ctx, grad_h):
        f, x, c0, c = ctx.saved_tensors
        grad_c = grad_h * (1 - torch.tanh(c) ** 2)
        grad_f = torch.zeros_like(f)
        grad_x = torch.zeros_like(x)
        carry = torch.zeros_like(c0)
        for t in reversed(range(f.size(0))):
            gc = grad_c[t] + carry
            c_prev = c[t - 1] if t > 0 else c0
            grad_f[t] = gc * (c_prev - x[t])
            grad_x[t] = gc * (1 - f[t])
            carry = gc * f[t]
        return grad_f, grad_x, carry
