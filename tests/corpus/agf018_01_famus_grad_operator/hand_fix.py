import torch


class GradOperator(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        return torch.where(ctx.saved_tensors[0] > 0, grad_output, torch.zeros_like(grad_output))


x = torch.randn(1, requires_grad=True)
GradOperator.apply(x).sum().backward()
print(x.grad)
