import torch


class MyReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_):
        ctx.save_for_backward(input_)
        return input_.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        (input_,) = ctx.saved_tensors
        grad_input = grad_output.clone()
        grad_input[input_ <= 0] = 0
        return grad_input


x = torch.randn(5, requires_grad=True)
MyReLU.apply(x).sum().backward()
print(x.grad)
