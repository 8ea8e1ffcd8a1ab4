"""VALID / INVALID examples of `agf004_autograd_function_gradient_count` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. the PyTorch docs' LinearFunction: three inputs, three gradients
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
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias
"""
    ),
    # 2. gradient reversal done right
    valid(
        """
import torch

class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.neg() * ctx.alpha, None
"""
    ),
    # 3. combined style with a default that no call site passes: one gradient is right
    valid(
        """
import torch

class ScaledSigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale=2.0):
        y = torch.sigmoid(x * scale)
        ctx.save_for_backward(y)
        ctx.scale = scale
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * y * (1 - y) * ctx.scale

def scaled_sigmoid(x):
    return ScaledSigmoid.apply(x)
"""
    ),
    # 4. a default that no call site passes still gets its None: not a surplus
    valid(
        """
import torch

class ScaledClone(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale: float = 1.0):
        ctx.scale = scale
        return x.clone() * scale

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.scale, None

def scaled_clone(x):
    return ScaledClone.apply(x)
"""
    ),
    # 5. setup_context style, one gradient per declared input
    valid(
        """
import torch

class MulConstant(torch.autograd.Function):
    @staticmethod
    def forward(x, k: float = 2.0):
        return x * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, k = inputs
        ctx.k = k

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.k, None
"""
    ),
    # 6. backward returns a helper's tuple: count unknown, left alone
    valid(
        """
import torch

def _conv_grads(ctx, grad):
    return grad, grad, None

class MyConv(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, stride):
        return torch.nn.functional.conv2d(x, w, stride=stride)

    @staticmethod
    def backward(ctx, grad):
        return _conv_grads(ctx, grad)
"""
    ),
    # 7. a class that is not an autograd Function (its own `Function` base)
    valid(
        """
class Function:
    pass

class Step(Function):
    @staticmethod
    def forward(ctx, x, k):
        return x

    @staticmethod
    def backward(ctx, g):
        return 0
"""
    ),
    # 8. backward that only raises: the Function is forward-only on purpose
    valid(
        """
import torch

class Quantize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bits: int):
        return torch.round(x * 2 ** bits) / 2 ** bits

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("Quantize is not differentiable")
"""
    ),
    # 9. clamp with tensor bounds: the bounds get None (they are saved tensors, no gradient wanted)
    valid(
        """
import torch.autograd as ag

class Clip(ag.Function):
    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.save_for_backward(x, lo, hi)
        return x.clamp(lo, hi)

    @staticmethod
    def backward(ctx, g):
        x, lo, hi = ctx.saved_tensors
        mask = (x >= lo) & (x <= hi)
        return g * mask, None, None
"""
    ),
    # 10. where() already used for a tensor condition
    valid(
        """
import torch

class LeakyStep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x > 0).float()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return torch.where(x.abs() < 1, g, torch.zeros_like(g))
"""
    ),
]

INVALID = [
    # 1. gradient reversal layer (DANN): alpha annotated float
    invalid(
        """
import torch

class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha: float):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.neg() * ctx.alpha
""",
        """
import torch

class GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha: float):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.neg() * ctx.alpha, None
""",
    ),
    # 2. `from torch.autograd import Function`, literal at every call site
    invalid(
        """
import torch
from torch.autograd import Function

class ScaleGrad(Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return (grad * ctx.scale,)

def head(features):
    return ScaleGrad.apply(features, 0.1)
""",
        """
import torch
from torch.autograd import Function

class ScaleGrad(Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return (grad * ctx.scale, None)

def head(features):
    return ScaleGrad.apply(features, 0.1)
""",
    ),
    # 3. setup_context style: the default is bound, so two gradients are expected
    invalid(
        """
import torch

class MulConstant(torch.autograd.Function):
    @staticmethod
    def forward(x, k=2.0):
        return x * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, k = inputs
        ctx.k = k

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.k
""",
        """
import torch

class MulConstant(torch.autograd.Function):
    @staticmethod
    def forward(x, k=2.0):
        return x * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, k = inputs
        ctx.k = k

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.k, None
""",
    ),
    # 4. a Python 0 for the non-tensor input
    invalid(
        """
import torch

class TopKMask(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores, k: int):
        idx = scores.topk(k, dim=-1).indices
        mask = torch.zeros_like(scores).scatter(-1, idx, 1.0)
        ctx.save_for_backward(mask)
        return scores * mask

    @staticmethod
    def backward(ctx, grad_output):
        (mask,) = ctx.saved_tensors
        return grad_output * mask, 0
""",
        """
import torch

class TopKMask(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores, k: int):
        idx = scores.topk(k, dim=-1).indices
        mask = torch.zeros_like(scores).scatter(-1, idx, 1.0)
        ctx.save_for_backward(mask)
        return scores * mask

    @staticmethod
    def backward(ctx, grad_output):
        (mask,) = ctx.saved_tensors
        return grad_output * mask, None
""",
    ),
    # 5. ReLU-like backward written with a Python conditional on a tensor
    invalid(
        """
import torch

class MyReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return grad_output if input > 0 else 0
""",
        """
import torch

class MyReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return torch.where(input > 0, grad_output, 0)
""",
    ),
    # 6. the missing input is a weight tensor: padding would drop its gradient if it needs
    #    one, so the padding is unsafe (kept only when a run shows it never requires grad)
    invalid(
        """
import torch

class Bilinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return x.mm(weight)

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        return grad_output.mm(weight.t())
""",
        """
import torch

class Bilinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return x.mm(weight)

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        return grad_output.mm(weight.t()), None
""",
    ),
    # 7. backward without any return: every gradient silently missing
    invalid(
        """
import torch

class Normalize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, eps):
        ctx.save_for_backward(x)
        ctx.eps = eps
        return x / (x.norm() + eps)

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        grad = grad_output / (x.norm() + ctx.eps)
"""
    ),
    # 8. import alias `ag.Function`, ints used as `dim=`, multi-line tuple
    invalid(
        """
import torch
import torch.autograd as ag

class SoftmaxDim(ag.Function):
    @staticmethod
    def forward(ctx, x, dim, temperature):
        y = torch.softmax(x / temperature, dim=dim)
        ctx.save_for_backward(y)
        ctx.dim = dim
        ctx.temperature = temperature
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        dot = (grad_output * y).sum(dim=ctx.dim, keepdim=True)
        return (
            y * (grad_output - dot) / ctx.temperature,
        )

def attention(scores):
    return SoftmaxDim.apply(scores, -1, 0.5)
""",
        """
import torch
import torch.autograd as ag

class SoftmaxDim(ag.Function):
    @staticmethod
    def forward(ctx, x, dim, temperature):
        y = torch.softmax(x / temperature, dim=dim)
        ctx.save_for_backward(y)
        ctx.dim = dim
        ctx.temperature = temperature
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        dot = (grad_output * y).sum(dim=ctx.dim, keepdim=True)
        return (
            y * (grad_output - dot) / ctx.temperature,
            None,
            None,
        )

def attention(scores):
    return SoftmaxDim.apply(scores, -1, 0.5)
""",
    ),
    # 9. combined style with defaults and call sites that disagree: padded to the declared
    #    count (autograd accepts trailing Nones beyond the inputs given), unsafe
    invalid(
        """
import torch

class Smooth(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, beta=1.0):
        ctx.save_for_backward(x)
        ctx.beta = beta
        return torch.nn.functional.smooth_l1_loss(x, torch.zeros_like(x), beta=beta)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * x.clamp(-ctx.beta, ctx.beta) / ctx.beta

a = Smooth.apply(torch.randn(3, requires_grad=True))
b = Smooth.apply(torch.randn(3, requires_grad=True), 0.5)
""",
        """
import torch

class Smooth(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, beta=1.0):
        ctx.save_for_backward(x)
        ctx.beta = beta
        return torch.nn.functional.smooth_l1_loss(x, torch.zeros_like(x), beta=beta)

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * x.clamp(-ctx.beta, ctx.beta) / ctx.beta, None

a = Smooth.apply(torch.randn(3, requires_grad=True))
b = Smooth.apply(torch.randn(3, requires_grad=True), 0.5)
""",
    ),
    # 10. straight-through estimator: `0` behind a Python condition (needs_input_grad)
    invalid(
        """
import torch

class BinarizeSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, w, threshold: float = 0.0):
        ctx.save_for_backward(w)
        return (w > threshold).float()

    @staticmethod
    def backward(ctx, grad_output):
        w, = ctx.saved_tensors
        grad_w = grad_output * (w.abs() <= 1).to(grad_output.dtype)
        return grad_w if ctx.needs_input_grad[0] else 0, 0
""",
        """
import torch

class BinarizeSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, w, threshold: float = 0.0):
        ctx.save_for_backward(w)
        return (w > threshold).float()

    @staticmethod
    def backward(ctx, grad_output):
        w, = ctx.saved_tensors
        grad_w = grad_output * (w.abs() <= 1).to(grad_output.dtype)
        return grad_w if ctx.needs_input_grad[0] else None, None
""",
    ),
    # surplus trailing None on two returns (deepseek-ai/TileKernels#10's shape: tensors
    # plus flags, one None too many; some releases raise, current ones ignore it)
    invalid(
        """
import torch

class GatedNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, gate, eps: float, skip_h_grad: bool):
        scale = h.pow(2).mean(-1, keepdim=True).add(eps).rsqrt()
        ctx.save_for_backward(h, gate, scale)
        ctx.skip_h_grad = skip_h_grad
        return h * scale * gate

    @staticmethod
    def backward(ctx, grad_out):
        h, gate, scale = ctx.saved_tensors
        gate_grad = (grad_out * h * scale).sum(0)
        if ctx.skip_h_grad:
            return None, gate_grad, None, None, None
        return grad_out * gate * scale, gate_grad, None, None, None
""",
        """
import torch

class GatedNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, gate, eps: float, skip_h_grad: bool):
        scale = h.pow(2).mean(-1, keepdim=True).add(eps).rsqrt()
        ctx.save_for_backward(h, gate, scale)
        ctx.skip_h_grad = skip_h_grad
        return h * scale * gate

    @staticmethod
    def backward(ctx, grad_out):
        h, gate, scale = ctx.saved_tensors
        gate_grad = (grad_out * h * scale).sum(0)
        if ctx.skip_h_grad:
            return None, gate_grad, None, None
        return grad_out * gate * scale, gate_grad, None, None
""",
    ),
    # one input, a parenthesised surplus None: a one-element tuple keeps its comma
    invalid(
        """
import torch

class Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        return (grad_output, None)
""",
        """
import torch

class Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        return (grad_output,)
""",
    ),
    # a surplus tensor fails on every release; which value is surplus is the author's call
    invalid(
        """
import torch

class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g, g
"""
    ),
]
