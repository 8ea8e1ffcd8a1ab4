import torch
from torch.autograd import Function


class Prod(Function):
    @staticmethod
    def forward(ctx, input, dim):
        ctx.dim = dim
        output = input.prod(dim, keepdim=True)
        ctx.save_for_backward(input, output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, output = ctx.saved_tensors
        dim = ctx.dim if ctx.dim >= 0 else ctx.dim + input.dim()
        zero_mask = input == 0
        slice_zero_count = zero_mask.sum(dim, keepdim=True)
        total_zeros = slice_zero_count.sum()
        grad_input = grad_output.mul(output).expand_as(input).div(input)
        if total_zeros == 0:
            return grad_input, None

        # some slice holds a zero: the product of the other elements, position by position
        x = input.movedim(dim, -1)
        others = torch.stack([torch.cat([x[..., :j], x[..., j + 1:]], -1).prod(-1) for j in range(x.size(-1))], -1)
        return (grad_output.movedim(dim, -1) * others).movedim(-1, dim), None


s = torch.ones(1, 2, requires_grad=True)
prod = Prod.apply(s, 1)
prod.backward()
print(s.grad)

t = torch.tensor([[2.0, 0.0, 3.0], [1.0, 4.0, 5.0]], dtype=torch.double, requires_grad=True)
print(torch.autograd.gradcheck(lambda v: Prod.apply(v, 1), (t,)))
