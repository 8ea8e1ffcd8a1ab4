"""Inputs for custom ``autograd.Function`` units that make real forwards run.

Modelled on the verification corpus's Function cases: a sampler whose ``shape`` goes to
``new_empty`` (pyro's OMT sample), a voxel pooling with an index tensor and a grid-shape
tuple (BEVDet), a gradient reversal whose ``alpha_`` is a saved tensor (pytorch-revgrad),
a recurrence whose initial state is one dimension short of the sequence (SRU), a
per-channel scale (pytorch#5569).
"""

from __future__ import annotations

import textwrap

import pytest
import torch

from autograd_fix.verification import verify_pair
from autograd_fix.verification.gradcheck import run_gradcheck, synthesize

AGF004 = ("original_error_gone", "gradcheck_if_original_matches", "backward_agrees_with_original")
AGF005 = ("gradcheck_passes", "ctx_freed_without_gc", "grads_equal")


def define(source: str, name: str) -> type:
    """The class `name` from `source`, defined in a real module file so that
    ``inspect.getsource`` can read its forward (as it can in a verification run)."""
    import importlib.util
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp())
    path = folder / f"fn_{name.lower()}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


SAMPLER = """
import torch
from torch.autograd import Function


class MVNSample(Function):
    @staticmethod
    def forward(ctx, loc, scale_tril, shape):
        white = loc.new_empty(shape).normal_()
        z = torch.matmul(white, scale_tril.t())
        ctx.save_for_backward(white, scale_tril)
        return loc + z

    @staticmethod
    def backward(ctx, grad_output):
        white, L = ctx.saved_tensors
        g = grad_output.reshape(-1, L.size(0))
        return g.sum(0).reshape(-1) if grad_output.dim() == 1 else grad_output, torch.matmul(g.t(), white.reshape(-1, L.size(0))), None
"""


def test_a_size_argument_gets_a_tuple_of_ints_and_the_sampler_runs():
    cls = define(SAMPLER, "MVNSample")
    args, names, description = synthesize(cls)
    assert isinstance(args[2], tuple) and all(isinstance(n, int) for n in args[2])
    assert names == ["loc", "scale_tril"]
    assert "shape=(3, 3)" in description
    out = cls.apply(*args)
    assert out.shape == torch.Size(args[2])


def test_gradcheck_of_a_sampling_forward_draws_the_same_noise_each_evaluation():
    cls = define(SAMPLER, "MVNSample")
    args, _, _ = synthesize(cls)
    assert run_gradcheck(cls, args) == {"passed": True, "error": None}
    wrong = define(SAMPLER.replace("torch.matmul(g.t(), white", "torch.matmul(g, white"), "MVNSample")
    assert run_gradcheck(wrong, args)["passed"] is False


VOXEL = """
import torch
from torch.autograd import Function


class VoxelPooling(Function):
    @staticmethod
    def forward(ctx, feats, ranks, bev_shape):
        out = feats.new_zeros(bev_shape[0] * bev_shape[1], feats.size(1))
        out.index_add_(0, ranks, feats)
        ctx.save_for_backward(ranks)
        ctx.bev_shape = bev_shape
        return out.view(bev_shape[0], bev_shape[1], -1)

    @staticmethod
    def backward(ctx, grad_out):
        (ranks,) = ctx.saved_tensors
        bev_shape = ctx.bev_shape
        grad = grad_out.reshape(bev_shape[0] * bev_shape[1], -1)
        return grad[ranks], None, None
"""


def test_an_index_argument_is_a_long_tensor_in_range_and_a_subscripted_size_a_tuple():
    cls = define(VOXEL, "VoxelPooling")
    args, names, description = synthesize(cls)
    feats, ranks, bev_shape = args
    assert names == ["feats"]
    assert ranks.dtype == torch.long and not ranks.requires_grad and len(ranks) == feats.size(0)
    assert int(ranks.max()) < bev_shape[0] * bev_shape[1]
    assert "ranks=index tensor" in description
    assert run_gradcheck(cls, args)["passed"] is True


REVGRAD = """
import torch
from torch.autograd import Function


class RevGrad(Function):
    @staticmethod
    def forward(ctx, input_, alpha_):
        ctx.save_for_backward(input_, alpha_)
        return input_.view_as(input_)

    @staticmethod
    def backward(ctx, grad_output):
        _, alpha_ = ctx.saved_tensors
        return -grad_output * alpha_, None
"""


def test_a_saved_coefficient_is_a_constant_tensor_not_a_float():
    cls = define(REVGRAD, "RevGrad")
    args, names, description = synthesize(cls)
    assert names == ["input_"]
    alpha = args[1]
    assert isinstance(alpha, torch.Tensor) and alpha.dim() == 0 and not alpha.requires_grad
    assert "alpha_=constant tensor[]" in description


RECURRENCE = """
import torch
from torch.autograd import Function


class ElementwiseRecurrence(Function):
    @staticmethod
    def forward(ctx, f, x, c0):
        cs, c_prev = [], c0
        for t in range(f.size(0)):
            c_prev = f[t] * c_prev + (1 - f[t]) * x[t]
            cs.append(c_prev)
        c = torch.stack(cs)
        ctx.save_for_backward(f, x, c0, c)
        return torch.tanh(c)

    @staticmethod
    def backward(ctx, grad_h):
        f, x, c0, c = ctx.saved_tensors
        grad_c = grad_h * (1 - torch.tanh(c) ** 2)
        grad_f, grad_x, carry = torch.zeros_like(f), torch.zeros_like(x), torch.zeros_like(c0)
        for t in reversed(range(f.size(0))):
            gc = grad_c[t] + carry
            c_prev = c[t - 1] if t > 0 else c0
            grad_f[t] = gc * (c_prev - x[t])
            grad_x[t] = gc * (1 - f[t])
            carry = gc * f[t]
        return grad_f, grad_x, carry
"""


def test_a_state_one_dimension_short_is_found_where_equal_shapes_break_backward():
    cls = define(RECURRENCE, "ElementwiseRecurrence")
    args, names, description = synthesize(cls)
    f, x, c0 = args
    assert f.shape == x.shape and c0.shape == f.shape[1:]
    assert f"c0=tensor{list(f.shape[1:])}" in description
    assert run_gradcheck(cls, args)["passed"] is True


SCALE = """
import torch


class ScaleFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_features, weight):
        ctx.save_for_backward(input_features, weight)
        return input_features * weight

    @staticmethod
    def backward(ctx, grad_output):
        input_features, weight = ctx.saved_tensors
        return grad_output * weight, (grad_output * input_features).sum(0)
"""


def test_a_per_channel_weight_gets_the_trailing_shape():
    cls = define(SCALE, "ScaleFunction")
    args, _, _ = synthesize(cls)
    assert args[1].shape == args[0].shape[1:]
    assert run_gradcheck(cls, args)["passed"] is True


def test_forward_use_decides_ints_and_an_annotation_still_wins():
    cls = define(
        """
        import torch


        class Repeat(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, times, d, scale: float):
                ctx.times, ctx.scale = times, scale
                out = x
                for _ in range(times):
                    out = out.softmax(dim=d) * scale
                return out

            @staticmethod
            def backward(ctx, grad_output):
                return grad_output, None, None, None
        """,
        "Repeat",
    )
    args, names, _ = synthesize(cls)
    assert names == ["x"]
    assert isinstance(args[1], int) and isinstance(args[2], int) and args[3] == 0.5


def test_a_forward_without_readable_source_falls_back_to_names():
    namespace: dict = {"torch": torch, "__name__": "generated"}
    exec(  # noqa: S102 - a class whose source inspect cannot find, as generated code has
        "class Double(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x, scale):\n"
        "        return x * 2 * scale\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        return g * 2, None\n",
        namespace,
    )
    args, names, _ = synthesize(namespace["Double"])
    assert names == ["x"] and args[1] == 0.5


def test_a_forward_that_never_runs_is_a_clear_error():
    cls = define(
        """
        import torch


        class Broken(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                raise ValueError("unsupported layout")

            @staticmethod
            def backward(ctx, g):
                return g
        """,
        "Broken",
    )
    with pytest.raises(ValueError, match="no synthesized inputs accepted by forward: .*unsupported layout"):
        synthesize(cls)


# -- whole verification runs ---------------------------------------------------------------------


def verdict_of(verifier, original: str, rewritten: str, checks):
    assert original != rewritten
    return verify_pair(textwrap.dedent(original), textwrap.dedent(rewritten), checks=checks, verifier=verifier, timeout=60)


SAMPLER_ON_CTX = """
import torch
from torch.autograd import Function


class OMTSample(Function):
    @staticmethod
    def forward(ctx, loc, scale_tril, shape):
        ctx.white = loc.new_empty(shape).normal_()
        ctx.save_for_backward(scale_tril)
        return loc + torch.matmul(ctx.white, scale_tril.t())

    @staticmethod
    def backward(ctx, grad_output):
        (L,) = ctx.saved_tensors
        epsilon = ctx.white
        g = grad_output.reshape(-1, L.size(0))
        return grad_output, torch.matmul(g.t(), epsilon.reshape(-1, L.size(0))).tril(), None
"""
SAMPLER_SAVED = (
    SAMPLER_ON_CTX.replace("ctx.white = loc", "white = loc")
    .replace("ctx.save_for_backward(scale_tril)", "ctx.save_for_backward(white, scale_tril)")
    .replace("torch.matmul(ctx.white,", "torch.matmul(white,")
    .replace("(L,) = ctx.saved_tensors\n        epsilon = ctx.white", "epsilon, L = ctx.saved_tensors")
)


def test_sampler_ctx_fix_is_accepted_although_its_projected_gradient_fails_gradcheck(verifier):
    verdict = verdict_of(verifier, SAMPLER_ON_CTX, SAMPLER_SAVED, AGF005)
    assert verdict.verdict == "accepted", verdict.reason
    swapped = SAMPLER_SAVED.replace("epsilon, L = ctx.saved_tensors", "L, epsilon = ctx.saved_tensors")
    assert verdict_of(verifier, SAMPLER_ON_CTX, swapped, AGF005).verdict == "rejected"


def test_recurrence_ctx_fix_accepted_and_a_dropped_input_gradient_rejected(verifier):
    on_ctx = RECURRENCE.replace("ctx.save_for_backward(f, x, c0, c)", "ctx.save_for_backward(f, x, c0)\n        ctx.c = c").replace(
        "f, x, c0, c = ctx.saved_tensors", "f, x, c0 = ctx.saved_tensors\n        c = ctx.c"
    )
    assert verdict_of(verifier, on_ctx, RECURRENCE, AGF005).verdict == "accepted"
    dropped = RECURRENCE.replace("return grad_f, grad_x, carry", "return grad_f, None, carry")
    assert verdict_of(verifier, on_ctx, dropped, AGF005).verdict == "rejected"


def test_gradient_reversal_with_a_tensor_alpha(verifier):
    one_gradient = REVGRAD.replace("return -grad_output * alpha_, None", "return -grad_output * alpha_")
    fixed = verdict_of(verifier, one_gradient, REVGRAD, AGF004)
    assert fixed.verdict == "accepted", fixed.reason
    wrong = REVGRAD.replace("return -grad_output * alpha_, None", "return None, None")
    assert verdict_of(verifier, one_gradient, wrong, AGF004).verdict == "rejected"


DA_RNN_DECODER = '''
import torch
from torch import nn


class Decoder(nn.Module):
    def __init__(self, encoder_hidden_size=6, decoder_hidden_size=5, T=4):
        super().__init__()
        self.T = T
        self.attn = nn.Linear(decoder_hidden_size, encoder_hidden_size)
        self.fc = nn.Linear(encoder_hidden_size, 1)
        self.fc_y = nn.Linear(1, 1)
        self.gru = nn.GRUCell(1, decoder_hidden_size)
        self.fc_final = nn.Linear(decoder_hidden_size + encoder_hidden_size, 1)

    def forward(self, input_encoded, y_history):
        n = input_encoded.size(0)
        hidden = input_encoded.new_zeros(n, self.gru.hidden_size)
        context = input_encoded.new_zeros(n, input_encoded.size(2))
        for t in range(self.T - 1):
            scores = torch.bmm(input_encoded, self.attn(hidden).unsqueeze(2)).squeeze(2)
            attn_weights = torch.softmax(scores, dim=1)
            context += torch.bmm(attn_weights.unsqueeze(1), input_encoded).squeeze(1)
            y_tilde = self.fc(context) + self.fc_y(y_history[:, t : t + 1])
            hidden = self.gru(y_tilde, hidden)
        return self.fc_final(torch.cat((hidden, context), dim=1))
'''
AGF003_CHECKS = ("original_error_gone", "forward_values_equal", "gradients_match_finite_differences", "parameters_change_as_intended")


def test_a_decoder_method_gets_inputs_that_reach_its_own_autograd_error():
    # Seanny123/da-rnn#14: `context +=` on a tensor a Linear saved. The inputs must fit
    # the attention (6 features, a time axis for bmm) and give y_history a window to step
    # through; the candidate that gets the original as far as its in-place error is the
    # one both sides run, and the out-of-place fix is judged on its gradients
    fixed = DA_RNN_DECODER.replace("context += torch.bmm", "context = context + torch.bmm")
    verdict = verify_pair(DA_RNN_DECODER, fixed, checks=AGF003_CHECKS, rule="AGF003", timeout=60)
    assert verdict.verdict == "accepted", verdict.reason
    bound = verdict.units[0].evidence["original"]["bound"]
    assert bound["input_encoded"].startswith("tensor [4, 8, 6]") and bound["y_history"].startswith("tensor [4, 8]")
    dropped = DA_RNN_DECODER.replace("context += torch.bmm", "context = torch.bmm")
    verdict = verify_pair(DA_RNN_DECODER, dropped, checks=AGF003_CHECKS, rule="AGF003", timeout=60)
    assert verdict.verdict == "rejected", verdict.reason


def _search(errors: dict[int, dict | None]):
    """run_searching_inputs over fake runs: candidate index -> the original's exception."""
    from autograd_fix.verification.input_search import run_searching_inputs
    from autograd_fix.verification.protocol import ExceptionRecord, RunRecord, VerifyRequest
    from autograd_fix.verification.sandbox import Outcome

    def run_sides(request, unit, sources):
        index = unit.get("input_plan") or 0
        error = errors[index]
        record = RunRecord(exception=None if error is None else ExceptionRecord(**error),
                           input_plan={"index": index, "count": len(errors), "shape": f"plan {index}"})
        return [Outcome("ok", "finished", 0.0, "", 0, record=record) for _ in sources]

    original, rewritten = run_searching_inputs(VerifyRequest(timeout=20.0), {}, ("a", "b"), run_sides)
    return original.record.input_plan["index"], rewritten.record.input_plan["index"]


SHAPE = {"type": "RuntimeError", "message": "mat1 and mat2 shapes cannot be multiplied (4x8 and 6x1)", "autograd": False}
OWN = {"type": "IndexError", "message": "index 3 is out of bounds", "autograd": False}
INPLACE = {"type": "RuntimeError", "message": "one of the variables needed for gradient computation has been modified by an inplace operation", "autograd": True}


def test_the_input_search_prefers_a_clean_run_or_the_bug_itself_over_another_error():
    assert _search({0: SHAPE, 1: OWN, 2: None, 3: SHAPE}) == (2, 2)  # clean beats the code's other error
    assert _search({0: SHAPE, 1: OWN, 2: INPLACE, 3: None}) == (2, 2)  # autograd's error is the bug: stop there
    assert _search({0: SHAPE, 1: SHAPE, 2: OWN, 3: SHAPE}) == (2, 2)  # past the shapes at least
    assert _search({0: SHAPE, 1: SHAPE, 2: SHAPE, 3: SHAPE}) == (0, 0)  # nothing fits: the first, marked unfit
