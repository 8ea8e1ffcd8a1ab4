import torch


class MHCPreNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, fn: torch.Tensor, norm_eps: float, fuse_grad_acc: bool, n_splits: int):
        rms = x.pow(2).mean(-1, keepdim=True).add(norm_eps).rsqrt()
        out = (x * rms) @ fn.t()
        ctx.save_for_backward(x, fn, rms)
        ctx.fuse_grad_acc = fuse_grad_acc
        ctx.n_splits = n_splits
        return out

    @staticmethod
    def backward(ctx, out_grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, None, None]:
        x, fn, rms = ctx.saved_tensors
        normed = x * rms
        fn_grad = out_grad.flatten(0, -2).t() @ normed.flatten(0, -2)
        normed_grad = out_grad @ fn
        x_grad = rms * (normed_grad - normed * (normed_grad * normed).mean(-1, keepdim=True))
        if ctx.fuse_grad_acc:
            return None, fn_grad, None, None, None, None
        return x_grad, fn_grad, None, None, None, None


def mhc_pre_norm(x, fn, norm_eps=1e-6, fuse_grad_acc=False, n_splits=1):
    return MHCPreNormFn.apply(x, fn, norm_eps, fuse_grad_acc, n_splits)


if __name__ == "__main__":
    x = torch.randn(2, 3, 8, requires_grad=True)
    fn = torch.randn(4, 8, requires_grad=True)
    out = mhc_pre_norm(x, fn)
    out.pow(2).sum().backward()
    print(round(out.sum().item(), 4), round(x.grad.abs().sum().item(), 4), round(fn.grad.abs().sum().item(), 4))
