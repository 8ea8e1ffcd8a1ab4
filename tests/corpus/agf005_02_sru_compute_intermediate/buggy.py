import torch
import torch.nn as nn


class SRU_Compute_CPU(torch.autograd.Function):
    """Elementwise recurrence of an SRU layer: c_t = f_t * c_{t-1} + (1 - f_t) * x_t."""

    @staticmethod
    def forward(ctx, u, x, weight_c, bias, init):
        length = x.size(0)
        u = u.view(length, x.size(1), -1, 3)
        x_tilde, forget, reset = u[..., 0], torch.sigmoid(u[..., 1] + bias[0]), torch.sigmoid(u[..., 2] + bias[1])
        c_prev = init
        cs = []
        for t in range(length):
            c_prev = forget[t] * c_prev + (1 - forget[t]) * (x_tilde[t] + weight_c * c_prev)
            cs.append(c_prev)
        c = torch.stack(cs)
        h = reset * c + (1 - reset) * x
        ctx.save_for_backward(u, x, weight_c, bias, init)
        ctx.intermediate = c
        ctx.forget, ctx.reset = forget, reset
        return h, c[-1]

    @staticmethod
    def backward(ctx, grad_h, grad_last):
        u, x, weight_c, bias, init = ctx.saved_tensors
        c = ctx.intermediate
        forget, reset = ctx.forget, ctx.reset
        length = x.size(0)
        grad_u = torch.zeros_like(u)
        grad_x = grad_h * (1 - reset)
        grad_reset = grad_h * (c - x)
        grad_c_next = grad_last.clone()
        grad_wc = torch.zeros_like(weight_c)
        grad_bias = torch.zeros_like(bias)
        for t in reversed(range(length)):
            c_prev = c[t - 1] if t > 0 else init
            gc = grad_c_next + grad_h[t] * reset[t]
            grad_u[t, ..., 0] = gc * (1 - forget[t])
            grad_forget = gc * (c_prev - x_tilde_t(u, t) - weight_c * c_prev)
            grad_u[t, ..., 1] = grad_forget * forget[t] * (1 - forget[t])
            grad_bias[0] += grad_u[t, ..., 1].sum(0)
            grad_wc += (gc * (1 - forget[t]) * c_prev).sum(0)
            grad_c_next = gc * (forget[t] + (1 - forget[t]) * weight_c)
        grad_u[..., 2] = grad_reset * reset * (1 - reset)
        grad_bias[1] += grad_u[..., 2].sum((0, 1))
        return grad_u.view(length, x.size(1), -1), grad_x, grad_wc, grad_bias, grad_c_next


def x_tilde_t(u, t):
    return u[t, ..., 0]


class SRUCell(nn.Module):
    def __init__(self, n_in):
        super().__init__()
        self.n_in = n_in
        self.weight = nn.Parameter(torch.randn(n_in, n_in * 3) * 0.1)
        self.weight_c = nn.Parameter(torch.rand(n_in) * 0.1)
        self.bias = nn.Parameter(torch.zeros(2, n_in))

    def forward(self, input, c0=None):
        if c0 is None:
            c0 = input.new_zeros(input.size(1), self.n_in)
        u = input.matmul(self.weight)
        return SRU_Compute_CPU.apply(u, input, self.weight_c, self.bias, c0)


if __name__ == "__main__":
    cell = SRUCell(4)
    x = torch.randn(6, 2, 4, requires_grad=True)
    h, c_last = cell(x)
    loss = h.pow(2).sum() + c_last.sum()
    loss.backward()
    print(f"loss={loss.item():.4f} gw={cell.weight.grad.abs().sum().item():.4f} gx={x.grad.abs().sum().item():.4f}")
