"""VALID / INVALID examples of `agf005_tensor_saved_on_ctx` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. the canonical pattern: tensors saved, the float on ctx
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
    # 2. shapes and dtypes on ctx are not tensors
    valid(
        """
import torch

class SumAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        ctx.dtype = x.dtype
        return x.sum()

    @staticmethod
    def backward(ctx, g):
        return g.expand(ctx.shape).to(ctx.dtype)
"""
    ),
    # 3. an unannotated parameter that is never used as a tensor: unsure, left alone
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
    # 4. a tensor on ctx that backward never reads (only used in forward)
    valid(
        """
import torch

class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.cache = x.clone()
        return ctx.cache * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2
"""
    ),
    # 5. a Python number from `.item()`
    valid(
        """
import torch

class MaxNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.peak = x.abs().max().item()
        return x / ctx.peak

    @staticmethod
    def backward(ctx, g):
        return g / ctx.peak
"""
    ),
    # 6. not an autograd Function
    valid(
        """
import torch

class Cache:
    def forward(self, ctx, x):
        ctx.out = torch.exp(x)
        return ctx.out

    def backward(self, ctx, g):
        return g * ctx.out
"""
    ),
    # 7. the attribute is stored conditionally: where to save is unclear
    valid(
        """
import torch

class MaybeMask(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, p: float):
        ctx.mask = None
        if p > 0:
            ctx.mask = (torch.rand_like(x) > p).to(x.dtype)
            return x * ctx.mask
        return x

    @staticmethod
    def backward(ctx, g):
        return (g if ctx.mask is None else g * ctx.mask), None
"""
    ),
    # 8. backward frees the attribute itself (`del ctx.buf`): left alone
    valid(
        """
import torch

class Buffered(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.buf = torch.sigmoid(x)
        return ctx.buf.clone()

    @staticmethod
    def backward(ctx, g):
        s = ctx.buf
        del ctx.buf
        return g * s * (1 - s)
"""
    ),
    # a tuple assignment of Python numbers to ctx: attributes are the right place for them
    valid(
        """
import torch


class Smooth(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, beta: float, steps: int):
        ctx.save_for_backward(x)
        ctx.beta, ctx.steps = beta, steps
        return torch.nn.functional.softplus(x, beta=beta) * steps

    @staticmethod
    def backward(ctx, grad_out):
        (x,) = ctx.saved_tensors
        beta, steps = ctx.beta, ctx.steps
        return grad_out * torch.sigmoid(beta * x) * steps, None, None
"""
    ),
    # kept output of a same-file module whose forward returns a tuple: not one tensor
    valid(
        """
import torch
import torch.nn as nn


class Coupling(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.net = nn.Linear(dim // 2, dim // 2)

    def forward(self, h):
        a, b = torch.chunk(h, 2, dim=-1)
        return torch.cat([a, b + self.net(a)], dim=-1), self.net.weight.sum()


class InvertibleStack(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, couplings):
        for layer in couplings:
            assert isinstance(layer, Coupling)
            h = layer(h)
        ctx.h = h
        return h

    @staticmethod
    def backward(ctx, grad_h):
        h = ctx.h
        del ctx.h
        return grad_h * h, None
"""
    ),
    # blocks of a ModuleList whose class nothing shows: their output proves nothing
    valid(
        """
import torch


class RunBlocks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, blocks):
        for blk in blocks:
            hidden = blk(hidden)
        ctx.hidden = hidden
        return hidden

    @staticmethod
    def backward(ctx, grad_hidden):
        hidden = ctx.hidden
        del ctx.hidden
        return grad_hidden * hidden, None
"""
    ),
    # the output already kept detached, deleted early in backward (RevTorch's fix)
    valid(
        """
import torch


class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = x.exp()
        ctx.out = out.detach()
        return out

    @staticmethod
    def backward(ctx, grad_output):
        out = ctx.out
        del ctx.out
        return grad_output * out
"""
    ),
    # an intermediate (not the output) that backward deletes: no cycle to break, and
    # save_for_backward cannot free it early; left alone
    valid(
        """
import torch


class Softplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ex = torch.exp(x)
        ctx.ex = ex
        return torch.log1p(ex)

    @staticmethod
    def backward(ctx, grad_output):
        ex = ctx.ex
        del ctx.ex
        return grad_output * ex / (1 + ex)
"""
    ),
    # a tuple of shapes and flags on ctx: no tensor in it
    valid(
        """
import torch

class SegmentSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, values, segments: int, dim: int):
        ctx.layout = values.shape, segments, dim
        ctx.flags = [values.requires_grad, dim < 0]
        return values.reshape(segments, -1).sum(1)

    @staticmethod
    def backward(ctx, grad_out):
        shape, segments, dim = ctx.layout
        needs, negative = ctx.flags
        grad = grad_out.repeat_interleave(shape[0] // segments)
        return grad.reshape(shape) if needs else None, None, None
"""
    ),
]

INVALID = [
    # the output kept on ctx, freed early by backward: save_for_backward cannot, a detached alias can
    invalid(
        """
import torch


class Tanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.y = y  # freed early in backward
        return y

    @staticmethod
    def backward(ctx, grad_y):
        y = ctx.y
        del ctx.y
        return grad_y * (1 - y * y)
""",
        """
import torch


class Tanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.y = y.detach()  # freed early in backward
        return y

    @staticmethod
    def backward(ctx, grad_y):
        y = ctx.y
        del ctx.y
        return grad_y * (1 - y * y)
""",
    ),
    # an invertible stack: the output of same-file coupling modules (asserted instances
    # whose forward takes and returns one tensor) kept on ctx and deleted by backward
    invalid(
        """
import torch
import torch.nn as nn


class Coupling(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.net = nn.Linear(dim // 2, dim // 2)

    def forward(self, h):
        a, b = torch.chunk(h, 2, dim=-1)
        return torch.cat([a, b + self.net(a)], dim=-1)

    def inverse(self, out):
        a, b = torch.chunk(out, 2, dim=-1)
        return torch.cat([a, b - self.net(a)], dim=-1)


class InvertibleStack(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, couplings):
        for layer in couplings:
            assert isinstance(layer, Coupling)
            h = layer(h)
        ctx.couplings = couplings
        ctx.h = h
        return h

    @staticmethod
    def backward(ctx, grad_h):
        h = ctx.h
        del ctx.h
        for layer in reversed(ctx.couplings):
            h = layer.inverse(h)
        return grad_h, None
""",
        """
import torch
import torch.nn as nn


class Coupling(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.net = nn.Linear(dim // 2, dim // 2)

    def forward(self, h):
        a, b = torch.chunk(h, 2, dim=-1)
        return torch.cat([a, b + self.net(a)], dim=-1)

    def inverse(self, out):
        a, b = torch.chunk(out, 2, dim=-1)
        return torch.cat([a, b - self.net(a)], dim=-1)


class InvertibleStack(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, couplings):
        for layer in couplings:
            assert isinstance(layer, Coupling)
            h = layer(h)
        ctx.couplings = couplings
        ctx.h = h.detach()
        return h

    @staticmethod
    def backward(ctx, grad_h):
        h = ctx.h
        del ctx.h
        for layer in reversed(ctx.couplings):
            h = layer.inverse(h)
        return grad_h, None
""",
    ),
    # 1. the output kept on ctx (reference cycle)
    invalid(
        """
import torch

class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = x.exp()
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.out
""",
        """
import torch

class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = x.exp()
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        (out,) = ctx.saved_tensors
        return grad_output * out
""",
    ),
    # 2. input and weight on ctx, merged with nothing, docstring in backward kept first
    invalid(
        """
import torch
from torch.autograd import Function

class MyLinear(Function):
    @staticmethod
    def forward(ctx, input, weight):
        ctx.input = input
        ctx.weight = weight
        return input.mm(weight.t())

    @staticmethod
    def backward(ctx, grad_output):
        \"\"\"Gradients of input @ weight.T.\"\"\"
        grad_input = grad_output.mm(ctx.weight)
        grad_weight = grad_output.t().mm(ctx.input)
        return grad_input, grad_weight
""",
        """
import torch
from torch.autograd import Function

class MyLinear(Function):
    @staticmethod
    def forward(ctx, input, weight):
        ctx.save_for_backward(input, weight)
        return input.mm(weight.t())

    @staticmethod
    def backward(ctx, grad_output):
        \"\"\"Gradients of input @ weight.T.\"\"\"
        input, weight = ctx.saved_tensors
        grad_input = grad_output.mm(weight)
        grad_weight = grad_output.t().mm(input)
        return grad_input, grad_weight
""",
    ),
    # 3. merged with an existing save_for_backward, unpacked straight into backward's `s`; the float stays on ctx
    invalid(
        """
import torch

class SiLUScaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale: float):
        ctx.save_for_backward(x)
        ctx.scale = scale
        ctx.sig = torch.sigmoid(x)
        return x * ctx.sig * scale

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        s = ctx.sig
        return g * ctx.scale * (s + x * s * (1 - s)), None
""",
        """
import torch

class SiLUScaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale: float):
        ctx.scale = scale
        sig = torch.sigmoid(x)
        ctx.save_for_backward(x, sig)
        return x * sig * scale

    @staticmethod
    def backward(ctx, g):
        x, s = ctx.saved_tensors
        return g * ctx.scale * (s + x * s * (1 - s)), None
""",
    ),
    # 4. import alias, a comment on the stored line moves with the save call
    invalid(
        """
import torch
import torch.autograd as ag

class Tanh(ag.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        # backward needs the output
        ctx.y = y
        return y

    @staticmethod
    def backward(ctx, g):
        return g * (1 - ctx.y ** 2)
""",
        """
import torch
import torch.autograd as ag

class Tanh(ag.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        # backward needs the output
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y ** 2)
""",
    ),
    # 5. setup_context style: the input and the output
    invalid(
        """
import torch

class Softplus(torch.autograd.Function):
    @staticmethod
    def forward(x, beta: float = 1.0):
        return torch.nn.functional.softplus(x, beta=beta)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, beta = inputs
        ctx.x = x
        ctx.beta = beta

    @staticmethod
    def backward(ctx, g):
        return g * torch.sigmoid(ctx.beta * ctx.x), None
""",
        """
import torch

class Softplus(torch.autograd.Function):
    @staticmethod
    def forward(x, beta: float = 1.0):
        return torch.nn.functional.softplus(x, beta=beta)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, beta = inputs
        ctx.save_for_backward(x)
        ctx.beta = beta

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * torch.sigmoid(ctx.beta * x), None
""",
    ),
    # 6. backward keeps the saved tuple in a variable: report only
    invalid(
        """
import torch

class Affine(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x)
        ctx.w = w.clone()
        return x.mm(w)

    @staticmethod
    def backward(ctx, g):
        saved = ctx.saved_tensors
        return g.mm(ctx.w.t()), saved[0].t().mm(g)
"""
    ),
    # 7. an intermediate computed inline in the attribute assignment
    invalid(
        """
import torch

class LogSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits):
        ctx.probs = torch.softmax(logits, dim=-1)
        return torch.log_softmax(logits, dim=-1)

    @staticmethod
    def backward(ctx, g):
        return g - ctx.probs * g.sum(dim=-1, keepdim=True)
""",
        """
import torch

class LogSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits):
        probs = torch.softmax(logits, dim=-1)
        ctx.save_for_backward(probs)
        return torch.log_softmax(logits, dim=-1)

    @staticmethod
    def backward(ctx, g):
        (probs,) = ctx.saved_tensors
        return g - probs * g.sum(dim=-1, keepdim=True)
""",
    ),
    # 8. forward returns early before the attribute is set: report only
    invalid(
        """
import torch

class Gate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, enabled: bool):
        if not enabled:
            return x.clone()
        ctx.mask = (x > 0).to(x.dtype)
        return x * ctx.mask

    @staticmethod
    def backward(ctx, g):
        return g * ctx.mask, None
"""
    ),
    # 9. existing unpacking extended, saved before the return
    invalid(
        """
import torch

class Swish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, beta):
        ctx.save_for_backward(x, beta)
        out = x * torch.sigmoid(beta * x)
        ctx.out = out
        return out

    @staticmethod
    def backward(ctx, g):
        x, beta = ctx.saved_tensors
        s = torch.sigmoid(beta * x)
        y = ctx.out
        return g * (y * beta + s * (1 - beta * y)), g * (x * y - x * y * s)
""",
        """
import torch

class Swish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, beta):
        out = x * torch.sigmoid(beta * x)
        ctx.save_for_backward(x, beta, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, beta, y = ctx.saved_tensors
        s = torch.sigmoid(beta * x)
        return g * (y * beta + s * (1 - beta * y)), g * (x * y - x * y * s)
""",
    ),
    # a tuple assignment to ctx attributes, read back by a tuple alias (asappresearch/sru#171's shape)
    invalid(
        """
import torch


class GatedRecurrence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u, h0):
        z, r = torch.sigmoid(u[..., 0]), torch.sigmoid(u[..., 1])
        h = z * h0 + (1 - z) * u[..., 2]
        ctx.save_for_backward(u, h0)
        ctx.z, ctx.r = z, r
        return h * r

    @staticmethod
    def backward(ctx, grad_out):
        u, h0 = ctx.saved_tensors
        z, r = ctx.z, ctx.r
        grad_h = grad_out * r
        grad_u = torch.stack([grad_h * (h0 - u[..., 2]) * z * (1 - z), grad_out * (z * h0 + (1 - z) * u[..., 2]) * r * (1 - r), grad_h * (1 - z)], -1)
        return grad_u, grad_h * z
""",
        """
import torch


class GatedRecurrence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u, h0):
        z, r = torch.sigmoid(u[..., 0]), torch.sigmoid(u[..., 1])
        h = z * h0 + (1 - z) * u[..., 2]
        ctx.save_for_backward(u, h0, z, r)
        return h * r

    @staticmethod
    def backward(ctx, grad_out):
        u, h0, z, r = ctx.saved_tensors
        grad_h = grad_out * r
        grad_u = torch.stack([grad_h * (h0 - u[..., 2]) * z * (1 - z), grad_out * (z * h0 + (1 - z) * u[..., 2]) * r * (1 - r), grad_h * (1 - z)], -1)
        return grad_u, grad_h * z
""",
    ),
    # an in-place initialiser chained on `new_empty` is a tensor too (pyro-ppl/pyro#1049's shape)
    invalid(
        """
import torch
from torch.autograd import Function


class NoisyShift(Function):
    @staticmethod
    def forward(ctx, mean, std):
        ctx.noise = mean.new_empty(mean.shape).normal_()
        return mean + ctx.noise * std

    @staticmethod
    def backward(ctx, grad_output):
        eps = ctx.noise
        return grad_output, (grad_output * eps).sum()
""",
        """
import torch
from torch.autograd import Function


class NoisyShift(Function):
    @staticmethod
    def forward(ctx, mean, std):
        noise = mean.new_empty(mean.shape).normal_()
        ctx.save_for_backward(noise)
        return mean + noise * std

    @staticmethod
    def backward(ctx, grad_output):
        (eps,) = ctx.saved_tensors
        return grad_output, (grad_output * eps).sum()
""",
    ),
    # tensors packed in one tuple attribute (DGL-style backward cache): reported, no fix
    invalid(
        """
import torch
from torch.autograd import Function


class GatherScale(Function):
    @staticmethod
    def forward(ctx, table, weights, rows):
        picked = torch.index_select(table, 0, rows)
        scaled = picked * weights.unsqueeze(1)
        ctx.cache = picked, torch.clone(weights), rows
        return scaled

    @staticmethod
    def backward(ctx, grad_scaled):
        picked, weights, rows = ctx.cache
        grad_table = torch.zeros(rows.max() + 1, picked.size(1)).index_add(0, rows, grad_scaled * weights.unsqueeze(1))
        grad_weights = (grad_scaled * picked).sum(1)
        return grad_table, grad_weights, None
"""
    ),
]
