import torch


class GradOperator(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output if ctx.saved_tensors[0] > 0 else 0


x = torch.randn(1, requires_grad=True)
GradOperator.apply(x).sum().backward()
print(x.grad)
