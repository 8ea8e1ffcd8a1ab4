"""VALID / INVALID examples of `agf018_backward_branches_on_tensor` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. the elementwise form already
    valid(
        """
import torch

class Relu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (x > 0).to(grad_output.dtype)
"""
    ),
    # 2. branching on needs_input_grad (Python bools)
    valid(
        """
import torch

class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        gx = grad * w if ctx.needs_input_grad[0] else None
        gw = (grad * x).sum() if ctx.needs_input_grad[1] else None
        return gx, gw
"""
    ),
    # 3. tests on shapes and dimensions
    valid(
        """
import torch

class Flatten(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.reshape(-1)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if x.dim() > 1 and x.shape[0] > 1:
            return grad.reshape(x.shape)
        return grad.view_as(x)
"""
    ),
    # 4. `is None` checks
    valid(
        """
import torch

class Maybe(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return None if grad is None else grad * 2
"""
    ),
    # 5. reduced to one element first
    valid(
        """
import torch

class ClipGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        if (grad.abs() > 1).any():
            grad = grad.clamp(-1, 1)
        return grad
"""
    ),
    # 6. a non-tensor ctx attribute
    valid(
        """
import torch

class Gate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x * alpha

    @staticmethod
    def backward(ctx, grad):
        return (grad * ctx.alpha if ctx.alpha > 0 else grad), None
"""
    ),
    # 7. a forward (not backward) that branches on a tensor item
    valid(
        """
import torch

class Step(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x if x.sum().item() > 0 else -x

    @staticmethod
    def backward(ctx, grad):
        return grad
"""
    ),
    # 8. a backward of a plain nn.Module helper, not an autograd.Function
    valid(
        """
import torch

class Helper:
    def backward(self, grad, x):
        return grad if x > 0 else 0
"""
    ),
    # a whole-tensor switch on a reduction to one value (gradient clipping): legal, left alone
    valid(
        """
import torch

class ClippedIdentity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weight, limit):
        ctx.save_for_backward(weight)
        ctx.limit = limit
        return weight.clone()

    @staticmethod
    def backward(ctx, grad_out):
        (weight,) = ctx.saved_tensors
        mask = weight.abs() > ctx.limit
        if mask.any():
            grad_out = grad_out.masked_fill(mask, 0.0)
        scale = grad_out.norm()
        return (grad_out / scale if grad_out.abs().max() > 10.0 else grad_out), None
"""
    ),
    # a mode flag that forward saves as a one-element tensor (nn-toolbox's ShakeShake): its
    # truth value is legal, the switch is for the whole tensor on purpose
    valid(
        """
import torch

class ShakeShakeFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, branches, keep):
        weights = torch.rand(branches.shape[0], branches.shape[1])
        weights = weights / weights.sum(dim=0, keepdim=True)
        if keep:
            ctx.save_for_backward(torch.ones(1), weights)
        else:
            ctx.save_for_backward(torch.zeros(1), branches.shape[0] * torch.ones(1).int())
        return (weights[..., None] * branches).sum(dim=0)

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.saved_tensors[0] == 1:
            weights = ctx.saved_tensors[1]
        else:
            weights = torch.rand(ctx.saved_tensors[1].item(), grad_output.shape[0])
        return weights[..., None] * grad_output, None
"""
    ),
    # a one-element flag bound to a name and unpacked, and a comparison with None
    # (`tensor == None` is Python's False, no tensor)
    valid(
        """
import torch

class BinarizeForwardOnly(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        needs_grad = torch.tensor([input.requires_grad])
        ctx.save_for_backward(needs_grad, input)
        return input.gt(0.5).to(input.dtype)

    @staticmethod
    def backward(ctx, g):
        needs_grad, input = ctx.saved_tensors
        if input == None:
            return None
        return (g if needs_grad else None)
"""
    ),
]

INVALID = [
    # 1. the founding article's UnsafeRelu
    invalid(
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
""",
        """
import torch

class UnsafeRelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        return torch.where(ctx.saved_tensors[0] > 0, grad_output, torch.zeros_like(grad_output))
""",
    ),
    # 2. unpacked saved tensor
    invalid(
        """
import torch

class MyRelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        grad_input = grad_output if x >= 0 else 0.0
        return grad_input
""",
        """
import torch

class MyRelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        grad_input = torch.where(x >= 0, grad_output, torch.zeros_like(grad_output))
        return grad_input
""",
    ),
    # 3. both branches tensors (leaky slope)
    invalid(
        """
import torch

class Leaky(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.where(x > 0, x, 0.1 * x)

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad if x > 0 else 0.1 * grad
""",
        """
import torch

class Leaky(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.where(x > 0, x, 0.1 * x)

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return torch.where(x > 0, grad, 0.1 * grad)
""",
    ),
    # 4. an if statement: report only
    invalid(
        """
import torch

class HardTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(-1, 1)

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        if x.abs() > 1:
            return grad_output * 0
        return grad_output
"""
    ),
    # 5. the branch on the incoming gradient itself: report only (which branch is meant?)
    invalid(
        """
import torch

class Clip(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        if grad > 1:
            grad = grad / grad.norm()
        return grad
"""
    ),
    # 6. aliased torch import, a derived tensor compared
    invalid(
        """
import torch as T

class Hinge(T.autograd.Function):
    @staticmethod
    def forward(ctx, margin):
        ctx.save_for_backward(margin)
        return (1 - margin).clamp(min=0)

    @staticmethod
    def backward(ctx, g):
        (margin,) = ctx.saved_tensors
        slack = 1 - margin
        return -g if slack > 0 else 0
""",
        """
import torch as T

class Hinge(T.autograd.Function):
    @staticmethod
    def forward(ctx, margin):
        ctx.save_for_backward(margin)
        return (1 - margin).clamp(min=0)

    @staticmethod
    def backward(ctx, g):
        (margin,) = ctx.saved_tensors
        slack = 1 - margin
        return T.where(slack > 0, -g, T.zeros_like(-g))
""",
    ),
    # 7. a negated test inside a tuple return: `not` on a tensor is ambiguous too; report only
    invalid(
        """
import torch

class Mask(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x)
        return x * y

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return (grad if not x < 0 else 0), None
"""
    ),
    # 8. a non-zero constant branch: reported, no fix
    invalid(
        """
import torch

class Odd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad if x > 0 else 1
"""
    ),
    # a count of zeros along a dimension is a multi-element tensor: its truth value is ambiguous
    invalid(
        """
import torch

class RowProduct(torch.autograd.Function):
    @staticmethod
    def forward(ctx, values):
        result = values.prod(1, keepdim=True)
        ctx.save_for_backward(values, result)
        return result

    @staticmethod
    def backward(ctx, grad_result):
        values, result = ctx.saved_tensors
        zeros_per_row = (values == 0).sum(1, keepdim=True)
        grad = grad_result * result / values
        return grad if zeros_per_row == 0 else torch.zeros_like(values)
""",
        """
import torch

class RowProduct(torch.autograd.Function):
    @staticmethod
    def forward(ctx, values):
        result = values.prod(1, keepdim=True)
        ctx.save_for_backward(values, result)
        return result

    @staticmethod
    def backward(ctx, grad_result):
        values, result = ctx.saved_tensors
        zeros_per_row = (values == 0).sum(1, keepdim=True)
        grad = grad_result * result / values
        return torch.where(zeros_per_row == 0, grad, torch.zeros_like(values))
""",
    ),
    # a stored elementwise mask tested as a whole: report only
    invalid(
        """
import torch

class LeakyStep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x > 0).to(x.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        positive = x > 0
        if positive:
            return grad_output
        return grad_output * 0.01
"""
    ),
    # a slot that one `save_for_backward` fills with a one-element flag and another with
    # the input: not one element in every run, still reported
    invalid(
        """
import torch

class MaybeFlag(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, frozen):
        if frozen:
            ctx.save_for_backward(torch.zeros(1))
        else:
            ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        if x > 0:
            return grad_output
        return grad_output * 0
"""
    ),
]
