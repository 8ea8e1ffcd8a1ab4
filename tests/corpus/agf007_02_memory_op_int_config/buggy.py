import torch
import torch.nn.functional as F


class StridedMemoryFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, stride=1, padding=0):
        ctx.save_for_backward(input, weight)
        ctx.stride = stride
        ctx.padding = padding
        return F.conv1d(input, weight, stride=stride, padding=padding)

    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        grad_input = torch.nn.grad.conv1d_input(input.shape, weight, grad_output, stride=ctx.stride, padding=ctx.padding)
        grad_weight = torch.nn.grad.conv1d_weight(input, weight.shape, grad_output, stride=ctx.stride, padding=ctx.padding)
        return grad_input, grad_weight, None, None


class StridedMemory(torch.nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=2, padding=1):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(out_channels, in_channels, kernel_size) * 0.1)
        self.stride = stride
        self.padding = padding

    def forward(self, x):
        return StridedMemoryFunction.apply(x, self.weight, self.stride, self.padding)


if __name__ == "__main__":
    layer = StridedMemory(3, 4, 3)
    x = torch.randn(2, 3, 10, requires_grad=True)
    out = layer(x)
    out.pow(2).sum().backward()
    print(tuple(out.shape), round(layer.weight.grad.abs().sum().item(), 4), round(x.grad.abs().sum().item(), 4))
