import torch
from torch.autograd import Function
from torch.autograd.function import once_differentiable


def sum_leftmost(value, dim):
    if dim < 0:
        dim += value.dim()
    if dim == 0:
        return value
    return value.reshape(-1, *value.shape[dim:]).sum(0)


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
        dim = L.shape[0]
        g = grad_output
        loc_grad = sum_leftmost(grad_output, -1)
        identity = torch.eye(dim, dtype=g.dtype)
        R_inv = torch.linalg.solve_triangular(L.t(), identity, upper=True)
        z_ja = z.unsqueeze(-1)
        g_R_inv = torch.matmul(g, R_inv).unsqueeze(-2)
        epsilon_jb = epsilon.unsqueeze(-2)
        g_ja = g.unsqueeze(-1)
        diff_L_ab = 0.5 * sum_leftmost(g_ja * epsilon_jb + g_R_inv * z_ja, -2)
        L_grad = torch.tril(diff_L_ab)
        return loc_grad, L_grad, None


class OMTMultivariateNormal:
    def __init__(self, loc, scale_tril):
        self.loc = loc
        self.scale_tril = scale_tril

    def rsample(self, sample_shape=torch.Size()):
        return _OMTMVNSample.apply(self.loc, self.scale_tril, sample_shape + self.loc.shape)


if __name__ == "__main__":
    loc = torch.zeros(3, requires_grad=True)
    scale_tril = (torch.eye(3) + 0.1 * torch.tril(torch.ones(3, 3), -1)).requires_grad_()
    dist = OMTMultivariateNormal(loc, scale_tril)
    z = dist.rsample(torch.Size([5]))
    loss = (z ** 2).sum()
    loss.backward()
    print(f"loss={loss.item():.4f} loc_grad={loc.grad.sum().item():.4f} L_grad={scale_tril.grad.sum().item():.4f}")
