import torch
import torch.nn as nn


class CheckpointFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run_function, length, *args):
        ctx.run_function = run_function
        ctx.input_tensors = list(args[:length])
        ctx.input_params = list(args[length:])
        with torch.no_grad():
            output_tensors = ctx.run_function(*ctx.input_tensors)
        return output_tensors

    @staticmethod
    def backward(ctx, *output_grads):
        for i in range(len(ctx.input_tensors)):
            temp = ctx.input_tensors[i]
            ctx.input_tensors[i] = temp.detach()
            ctx.input_tensors[i].requires_grad = temp.requires_grad
        with torch.enable_grad():
            output_tensors = ctx.run_function(*ctx.input_tensors)
        input_grads = torch.autograd.grad(output_tensors, ctx.input_tensors + ctx.input_params, output_grads, allow_unused=True)
        return (None, None) + input_grads


def checkpoint(function, inputs, params):
    args = tuple(inputs) + tuple(params)
    return CheckpointFunction.apply(function, len(inputs), *args)


class Bottleneck(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.norm = nn.BatchNorm2d(channels)
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)

    def bn_function(self, x):
        return self.conv(torch.relu(self.norm(x)))

    def forward(self, x):
        return checkpoint(self.bn_function, (x,), self.parameters())


if __name__ == "__main__":
    block = Bottleneck(4)
    block.eval()
    x = torch.randn(2, 4, 6, 6, requires_grad=True)
    out = block(x)
    out.pow(2).sum().backward()
    print(round(out.sum().item(), 4), round(x.grad.abs().sum().item(), 4), round(block.conv.weight.grad.abs().sum().item(), 4))
