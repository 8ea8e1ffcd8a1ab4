"""A hand-written ReLU as a custom autograd Function (the founding article's UnsafeRelu).

Bug (AGF018): `backward` returns `grad_output if x > 0 else 0`: Python asks a tensor of
booleans for one truth value, which raises for any batch with more than one element.
Run it: `python examples/backward_branches_on_tensor.py`.
"""

import torch


class UnsafeRelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output if ctx.saved_tensors[0] > 0 else 0


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(8, dtype=torch.float64, requires_grad=True)
    try:
        ok = torch.autograd.gradcheck(UnsafeRelu.apply, (x,))
        print("gradcheck passes" if ok else "gradcheck fails")
    except RuntimeError as error:
        print(f"backward failed: {error}")
