"""VALID / INVALID examples of `agf007_non_tensor_in_save_for_backward` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. tensors saved, the float kept on ctx (the correct pattern)
    valid(
        """
import torch

class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale: float):
        ctx.scale = scale
        ctx.save_for_backward(x)
        return x * scale

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return grad_output * ctx.scale, None
"""
    ),
    # 2. None is accepted by save_for_backward (optional bias)
    valid(
        """
import torch
from torch.autograd import Function

class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight.t())
        if bias is not None:
            output += bias
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_bias = grad_output.sum(0) if bias is not None else None
        return grad_output.mm(weight), grad_output.t().mm(input), grad_bias
"""
    ),
    # 3. an unannotated parameter: could be a tensor, left alone
    valid(
        """
import torch

class Mul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g * b, g * a
"""
    ),
    # 4. a number turned into a tensor first
    valid(
        """
import torch

class Clamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, limit: float):
        bound = torch.tensor(limit, dtype=x.dtype)
        ctx.save_for_backward(x, bound)
        return x.clamp(-limit, limit)

    @staticmethod
    def backward(ctx, g):
        x, bound = ctx.saved_tensors
        return g * (x.abs() <= bound), None
"""
    ),
    # 5. setup_context style saving the input tensors only
    valid(
        """
import torch

class Cube(torch.autograd.Function):
    @staticmethod
    def forward(x, power: int = 3):
        return x ** power

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, power = inputs
        ctx.save_for_backward(x)
        ctx.power = power

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * ctx.power * x ** (ctx.power - 1), None
"""
    ),
    # 6. results of torch ops are tensors
    valid(
        """
import torch

class SoftClip(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        t = torch.tanh(x)
        scale = x.abs().max()
        ctx.save_for_backward(t, scale)
        return t * scale

    @staticmethod
    def backward(ctx, g):
        t, scale = ctx.saved_tensors
        return g * (1 - t * t) * scale
"""
    ),
    # 7. not an autograd Function: some other save_for_backward
    valid(
        """
class Recorder:
    def save_for_backward(self, *values):
        self.values = values

def record(ctx: Recorder, x: float):
    ctx.save_for_backward(x, 1.0)
"""
    ),
    # 8. a tensor parameter annotated as such
    valid(
        """
import torch
from torch import Tensor

class Gate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, gate: Tensor):
        ctx.save_for_backward(x, gate)
        return x * gate

    @staticmethod
    def backward(ctx, g):
        x, gate = ctx.saved_tensors
        return g * gate, g * x
"""
    ),
    # `Optional[Tensor] = None` saved: a tensor or None, both accepted
    valid(
        """
from typing import Optional

import torch


class MaskedScale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, mask: Optional[torch.Tensor] = None, scale: float = 1.0):
        ctx.save_for_backward(mask)
        ctx.scale = scale
        return x * scale if mask is None else x * mask * scale

    @staticmethod
    def backward(ctx, grad_out):
        (mask,) = ctx.saved_tensors
        grad = grad_out * ctx.scale
        return (grad if mask is None else grad * mask), None, None
"""
    ),
]

INVALID = [
    # 1. a float parameter saved with the tensor
    invalid(
        """
import torch

class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale: float):
        ctx.save_for_backward(x, scale)
        return x * scale

    @staticmethod
    def backward(ctx, grad_output):
        x, scale = ctx.saved_tensors
        return grad_output * scale, None
""",
        """
import torch

class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale: float):
        ctx.scale = scale
        ctx.save_for_backward(x)
        return x * scale

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        scale = ctx.scale
        return grad_output * scale, None
""",
    ),
    # 2. an `.item()` result (a Python number), with a comment kept in place
    invalid(
        """
import torch

class MaxNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        peak = x.abs().max().item()
        # keep what backward needs
        ctx.save_for_backward(x, peak)
        return x / peak

    @staticmethod
    def backward(ctx, grad_output):
        x, peak = ctx.saved_tensors
        return grad_output / peak
""",
        """
import torch

class MaxNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        peak = x.abs().max().item()
        # keep what backward needs
        ctx.peak = peak
        ctx.save_for_backward(x)
        return x / peak

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        peak = ctx.peak
        return grad_output / peak
""",
    ),
    # 3. a literal: the attribute takes the name backward unpacks it as
    invalid(
        """
import torch
from torch.autograd import Function

class LeakyClamp(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x, 0.01)
        return torch.where(x > 0, x, x * 0.01)

    @staticmethod
    def backward(ctx, g):
        x, slope = ctx.saved_tensors
        return torch.where(x > 0, g, g * slope)
""",
        """
import torch
from torch.autograd import Function

class LeakyClamp(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.slope = 0.01
        ctx.save_for_backward(x)
        return torch.where(x > 0, x, x * 0.01)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        slope = ctx.slope
        return torch.where(x > 0, g, g * slope)
""",
    ),
    # 4. the input's shape (a torch.Size) for reshaping the gradient
    invalid(
        """
import torch

class FlattenSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x.shape)
        return x.sum()

    @staticmethod
    def backward(ctx, g):
        shape, = ctx.saved_tensors
        return g.expand(shape)
""",
        """
import torch

class FlattenSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        return x.sum()

    @staticmethod
    def backward(ctx, g):
        shape = ctx.shape
        return g.expand(shape)
""",
    ),
    # 5. indexed reads: the removed index is read from ctx, later indices shift
    invalid(
        """
import torch

class PowerLaw(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, p: int, w):
        ctx.save_for_backward(x, p, w)
        return w * x ** p

    @staticmethod
    def backward(ctx, g):
        x = ctx.saved_tensors[0]
        w = ctx.saved_tensors[2]
        return g * w * ctx.saved_tensors[1] * x ** (ctx.saved_tensors[1] - 1), None, g * x ** ctx.saved_tensors[1]
""",
        """
import torch

class PowerLaw(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, p: int, w):
        ctx.p = p
        ctx.save_for_backward(x, w)
        return w * x ** p

    @staticmethod
    def backward(ctx, g):
        x = ctx.saved_tensors[0]
        w = ctx.saved_tensors[1]
        return g * w * ctx.p * x ** (ctx.p - 1), None, g * x ** ctx.p
""",
    ),
    # 6. setup_context style: the forward parameter's annotation carries over
    invalid(
        """
import torch

class Cube(torch.autograd.Function):
    @staticmethod
    def forward(x, power: int = 3):
        return x ** power

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, power = inputs
        ctx.save_for_backward(x, power)

    @staticmethod
    def backward(ctx, g):
        x, power = ctx.saved_tensors
        return g * power * x ** (power - 1), None
""",
        """
import torch

class Cube(torch.autograd.Function):
    @staticmethod
    def forward(x, power: int = 3):
        return x ** power

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, power = inputs
        ctx.power = power
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        power = ctx.power
        return g * power * x ** (power - 1), None
""",
    ),
    # 7. backward keeps the saved tuple around: report only
    invalid(
        """
import torch

class Huber(torch.autograd.Function):
    @staticmethod
    def forward(ctx, r, delta: float = 1.0):
        ctx.save_for_backward(r, delta)
        return torch.where(r.abs() < delta, 0.5 * r * r, delta * (r.abs() - 0.5 * delta))

    @staticmethod
    def backward(ctx, g):
        saved = ctx.saved_tensors
        r, delta = saved
        return g * r.clamp(-delta, delta), None
"""
    ),
    # 8. alias `import torch.autograd as ag`, two numbers and a parenthesized unpacking
    invalid(
        """
import torch
import torch.autograd as ag

class Focal(ag.Function):
    @staticmethod
    def forward(ctx, p, gamma: float, eps: float):
        ctx.save_for_backward(p, gamma, eps)
        return -((1 - p) ** gamma) * torch.log(p + eps)

    @staticmethod
    def backward(ctx, g):
        (p, gamma, eps) = ctx.saved_tensors
        d = gamma * (1 - p) ** (gamma - 1) * torch.log(p + eps) - (1 - p) ** gamma / (p + eps)
        return g * d, None, None
""",
        """
import torch
import torch.autograd as ag

class Focal(ag.Function):
    @staticmethod
    def forward(ctx, p, gamma: float, eps: float):
        ctx.gamma = gamma
        ctx.eps = eps
        ctx.save_for_backward(p)
        return -((1 - p) ** gamma) * torch.log(p + eps)

    @staticmethod
    def backward(ctx, g):
        (p,) = ctx.saved_tensors
        gamma = ctx.gamma
        eps = ctx.eps
        d = gamma * (1 - p) ** (gamma - 1) * torch.log(p + eps) - (1 - p) ** gamma / (p + eps)
        return g * d, None, None
""",
    ),
    # `Optional[bool] = None` (pytorch#67827's lobpcg `largest`): a bool whenever it is not None
    invalid(
        """
from typing import Optional

import torch
from torch import Tensor


class TopKEigFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A: Tensor, k: Optional[int] = None, descending: Optional[bool] = None):
        evals, evecs = torch.linalg.eigh(A)
        if descending:
            evals, evecs = evals.flip(-1), evecs.flip(-1)
        ctx.save_for_backward(A, evals, evecs, descending)
        return evals[..., :k], evecs[..., :k]

    @staticmethod
    def backward(ctx, evals_grad, evecs_grad):
        A, evals, evecs, descending = ctx.saved_tensors
        return evecs @ torch.diag_embed(evals_grad) @ evecs.mT, None, None
""",
        """
from typing import Optional

import torch
from torch import Tensor


class TopKEigFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A: Tensor, k: Optional[int] = None, descending: Optional[bool] = None):
        evals, evecs = torch.linalg.eigh(A)
        if descending:
            evals, evecs = evals.flip(-1), evecs.flip(-1)
        ctx.descending = descending
        ctx.save_for_backward(A, evals, evecs)
        return evals[..., :k], evecs[..., :k]

    @staticmethod
    def backward(ctx, evals_grad, evecs_grad):
        A, evals, evecs = ctx.saved_tensors
        descending = ctx.descending
        return evecs @ torch.diag_embed(evals_grad) @ evecs.mT, None, None
""",
    ),
]
