"""Torch API names: the one vocabulary module (issue 18) that rules and analyses share.

Rules match these through `ImportIndex.qualified_name`, never through source text, so
`import torch as T; T.log(1 + x)` and `from torch import log` are the same call. Names
of the torch API that an analysis needs go here, so that what torch does is said once.
(Older sets still live beside the analyses that first needed them, such as
`semantic/gradmode.py`'s grad-mode context managers and `semantic/module_calls.py`'s
`MODULE_API_METHODS`; they move here as they are touched.) The questions asked of these
names are answered once, in `codemods/semantic/` (`inplace.py`, `nn_modules.py`).
"""

from __future__ import annotations

from types import MappingProxyType

from autograd_fix.codemods.torch_version import TorchVersion

#: `torch.utils.checkpoint` entry points that take `use_reentrant=` (and warn without it)
CHECKPOINT_FUNCTIONS = frozenset(
    {"torch.utils.checkpoint.checkpoint", "torch.utils.checkpoint.checkpoint_sequential"}
)
#: `use_reentrant=` exists from this release on (pytorch/pytorch#69508, torch 1.11)
USE_REENTRANT_SINCE = TorchVersion(1, 11)
#: `zero_grad(set_to_none=...)` exists from 1.7; its default is True from 2.0 (pytorch/pytorch#92731)
SET_TO_NONE_SINCE = TorchVersion(1, 7)
SET_TO_NONE_DEFAULT_SINCE = TorchVersion(2, 0)

LOG = frozenset({"torch.log"})
EXP = frozenset({"torch.exp"})
SUM = frozenset({"torch.sum"})
#: the numerically stable forms the rewrites produce (all exist since torch 1.0 / 1.6)
LOG1P = "torch.log1p"
EXPM1 = "torch.expm1"
LOGSUMEXP = "torch.logsumexp"

#: tensor constructors: a value built by one of these is a tensor
PARAMETER_CONSTRUCTORS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
#: methods of `nn.Module` that yield its parameters (`named_*` yields `(name, parameter)`)
PARAMETER_ITERATORS = frozenset({"parameters"})
NAMED_PARAMETER_ITERATORS = frozenset({"named_parameters"})

#: anomaly mode: records a forward stack trace for every graph node (a debugging aid)
SET_DETECT_ANOMALY = frozenset({"torch.autograd.set_detect_anomaly", "torch.autograd.anomaly_mode.set_detect_anomaly"})
DETECT_ANOMALY = frozenset({"torch.autograd.detect_anomaly", "torch.autograd.anomaly_mode.detect_anomaly"})
#: caching-allocator flushes: release cached blocks, to be re-reserved on the next step
EMPTY_CACHE = frozenset({"torch.cuda.empty_cache", "torch.cuda.memory.empty_cache", "torch.mps.empty_cache", "torch.xpu.empty_cache"})

#: nn.Module methods that return the module itself: `ActorCritic().to(device)` is still
#: an `ActorCritic`
MODULE_SELF_RETURNING_METHODS = frozenset(
    {"to", "cuda", "cpu", "float", "double", "half", "bfloat16", "train", "eval", "requires_grad_", "share_memory",
     "type", "apply", "to_empty", "ipu", "xpu", "mtia"}
)

#: arguments torch takes only as integers (position, keyword): what is passed there never
#: requires grad, so a forward input read there (`seq_lengths.data.cpu().numpy()`) is no
#: tracked tensor
INTEGER_ARGUMENTS = {
    "torch.nn.utils.rnn.pack_padded_sequence": (1, "lengths"),
}

#: modules whose functions return Python values, never a tensor (`random.randint(0, 1)`)
PYTHON_VALUE_MODULES = frozenset({"random", "math", "statistics"})


# -- in-place tensor methods (semantic/inplace.py answers "is this call in-place") ---------
#: the public in-place methods of `torch.Tensor` (a trailing underscore, torch's convention),
#: read from `dir(torch.Tensor)` of torch 2.13; a name ending in `_` that is not here (a user
#: method, a newer torch's) is not known to be one
TENSOR_INPLACE_METHODS = frozenset(
    {
     "abs_", "absolute_", "acos_", "acosh_", "add_", "addbmm_", "addcdiv_", "addcmul_", "addmm_", "addmv_",
     "addr_", "apply_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan2_", "arctan_", "arctanh_",
     "as_strided_", "asin_", "asinh_", "atan2_", "atan_", "atanh_", "baddbmm_", "bernoulli_",
     "bitwise_and_", "bitwise_left_shift_", "bitwise_not_", "bitwise_or_", "bitwise_right_shift_",
     "bitwise_xor_", "cauchy_", "ceil_", "clamp_", "clamp_max_", "clamp_min_", "clip_", "conj_physical_",
     "copy_", "copysign_", "cos_", "cosh_", "cumprod_", "cumsum_", "deg2rad_", "detach_", "digamma_",
     "div_", "divide_", "eq_", "erf_", "erfc_", "erfinv_", "exp2_", "exp_", "expm1_", "exponential_",
     "fill_", "fill_diagonal_", "fix_", "float_power_", "floor_", "floor_divide_", "fmod_", "frac_", "gcd_",
     "ge_", "geometric_", "greater_", "greater_equal_", "gt_", "heaviside_", "hypot_", "i0_", "igamma_",
     "igammac_", "index_add_", "index_copy_", "index_fill_", "index_put_", "index_reduce_", "lcm_",
     "ldexp_", "le_", "lerp_", "less_", "less_equal_", "lgamma_", "log10_", "log1p_", "log2_", "log_",
     "log_normal_", "logical_and_", "logical_not_", "logical_or_", "logical_xor_", "logit_", "lt_", "map2_",
     "map_", "masked_fill_", "masked_scatter_", "mul_", "multiply_", "mvlgamma_", "nan_to_num_", "ne_",
     "neg_", "negative_", "nextafter_", "normal_", "not_equal_", "polygamma_", "pow_", "put_", "rad2deg_",
     "random_", "reciprocal_", "relu_", "remainder_", "renorm_", "requires_grad_", "resize_", "resize_as_",
     "resize_as_sparse_", "round_", "rsqrt_", "scatter_", "scatter_add_", "scatter_reduce_", "set_", "sgn_",
     "share_memory_", "sigmoid_", "sign_", "sin_", "sinc_", "sinh_", "sparse_resize_",
     "sparse_resize_and_clear_", "sqrt_", "square_", "squeeze_", "sub_", "subtract_", "swapaxes_",
     "swapdims_", "t_", "tan_", "tanh_", "transpose_", "tril_", "triu_", "true_divide_", "trunc_",
     "uniform_", "unsqueeze_", "xlogy_", "zero_"
    }
)
#: in-place by name, but they change no value of the tensor: a flag (`requires_grad_`), the
#: autograd history (`detach_`), where the storage lives (`share_memory_`)
VALUE_PRESERVING_INPLACE_METHODS = frozenset({"requires_grad_", "detach_", "share_memory_"})
#: torch methods that exist only without the underscore (`retain_grad`, `pin_memory`,
#: `record_stream`) and change no value; spelt with one they are no torch method at all
NOT_INPLACE_SPELLINGS = frozenset({"retain_grad_", "pin_memory_", "record_stream_"})

# -- nn.Module classes (semantic/nn_modules.py answers "is this an nn.Module") ---------------
#: bases that make a class an `nn.Module`, besides the classes of `torch.nn` itself
MODULE_BASES = frozenset(
    {"torch.nn.Module", "torch.nn.modules.module.Module", "torch.jit.ScriptModule",
     "pytorch_lightning.LightningModule", "pytorch_lightning.core.LightningModule",
     "pytorch_lightning.core.module.LightningModule", "lightning.LightningModule",
     "lightning.pytorch.LightningModule", "lightning.pytorch.core.LightningModule",
     "lightning.pytorch.core.module.LightningModule"}
)
#: `torch.nn` namespaces of functions, not module classes
NN_FUNCTION_NAMESPACES = ("torch.nn.functional", "torch.nn.init", "torch.nn.utils")
#: classes of `torch.nn` that are not modules (from `dir(torch.nn)` of torch 2.13: every
#: other class there is one; torch names its classes capitalised, its functions not)
NN_NON_MODULE_CLASSES = frozenset(
    {"Parameter", "UninitializedParameter", "Buffer", "UninitializedBuffer", "LinearCrossEntropyOptions"}
)
#: bases that make a class certainly no module: torch's other class families, and Python's own
NON_MODULE_BASE_PREFIXES = (
    "torch.autograd.Function", "torch.autograd.function.", "torch.optim.", "torch.utils.data.",
    "abc.", "enum.", "typing.", "dataclasses.", "collections.", "argparse.", "threading.", "json.",
)
#: builtin bases of a class that is no module
NON_MODULE_BUILTIN_BASES = frozenset({"object", "Exception", "BaseException", "dict", "list", "tuple", "str", "int", "float", "set"})
#: methods only an nn.Module has: a class of unknown base calling one on `self`, or
#: defining `forward`, is a module by its own code
MODULE_ONLY_METHODS = frozenset(
    {"register_buffer", "register_parameter", "add_module", "register_module", "named_parameters", "parameters",
     "named_modules", "modules", "children", "named_children", "named_buffers", "buffers",
     "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook"}
)


#: context managers and decorators that turn autograd off (`semantic.gradmode`, and the
#: project index, which follows a project's own wrappers of them across files)
NO_GRAD_NAMES = frozenset(
    {
        "torch.no_grad",
        "torch.inference_mode",
        "torch.autograd.no_grad",
        "torch.autograd.inference_mode",
        "torch.autograd.grad_mode.no_grad",
        "torch.autograd.grad_mode.inference_mode",
    }
)
SET_GRAD_ENABLED_NAMES = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled", "torch.autograd.grad_mode.set_grad_enabled"})
#: tensor methods and torch functions that rescale a value (a loss or a gradient) by a
#: factor: `loss.div(k)`, `p.grad.mul_(s)`, `torch._foreach_div_(grads, k)` (AGF019)
SCALING_METHODS = frozenset({"div", "div_", "mul", "mul_", "divide", "divide_", "multiply", "multiply_", "true_divide", "true_divide_"})
SCALING_FUNCTIONS = frozenset(
    {"torch.div", "torch.mul", "torch.divide", "torch.multiply", "torch.true_divide", "torch._foreach_div_", "torch._foreach_mul_"}
)
#: loss arguments that make a loss a sum over its elements, not a mean (keyword -> the
#: values, as source text): summed over micro-batches it is the big batch's sum
SUM_REDUCTIONS = MappingProxyType({"reduction": frozenset({"'sum'", '"sum"'}), "size_average": frozenset({"False"})})

#: packages whose import says a file trains across processes (AGF015: gradient buffers
#: kept allocated can be deliberate there)
DISTRIBUTED_PACKAGES = ("torch.distributed",)

#: a file that contains none of these does not use PyTorch (not even through a model
#: passed in), so no rule applies to it and it is not parsed at all (`engine.triggered`;
#: here, in a module without libcst, so that the command line can skip such a file
#: before loading libcst and the rules)
TORCH_USE_MARKERS = ("torch", ".eval()", ".backward(", ".train(False)")


def uses_torch(text: str) -> bool:
    return any(marker in text for marker in TORCH_USE_MARKERS)


#: callables that run a function in a new thread or process, and where that function is
#: given (positional index, keyword): `threading.Thread(target=worker)`,
#: `mp.spawn(run, nprocs=n)`. A new thread starts with grad mode on (grad mode is
#: thread-local) and a spawned process with torch's defaults; a forked one inherits the
#: mode of the thread that starts it. The target's return value is dropped.
THREAD_TARGET_LAUNCHERS = MappingProxyType(
    {
        "threading.Thread": (1, "target"),
        "multiprocessing.Process": (1, "target"),
        "torch.multiprocessing.Process": (1, "target"),
        "torch.multiprocessing.spawn": (0, "fn"),
        "torch.multiprocessing.start_processes": (0, "fn"),
    }
)

#: tensor methods that reduce a loss to the scalar a backward needs (`loss.mean().backward()`):
#: the graph backpropagated is the loss's, plus the reduction made right there
LOSS_REDUCTIONS = frozenset({"mean", "sum"})

#: `torch.distributions` classes: what their `sample()` draws is made under `no_grad`
#: (a graph-free tensor; `rsample()` is the reparameterised draw that keeps the graph)
DISTRIBUTIONS_PACKAGE = "torch.distributions."
DISTRIBUTION_SAMPLING_METHODS = frozenset({"sample", "sample_n"})

#: methods of Python's `str` that neither `nn.Module` nor `torch.Tensor` has, nor a model's
#: usual own methods (`encode` is a VAE's or a transformer's): a value they are called on
#: is a string (`mx_name.lower()`), not a model
STR_ONLY_METHODS = frozenset(
    {"lower", "upper", "startswith", "endswith", "strip", "lstrip", "rstrip", "splitlines", "capitalize",
     "casefold", "isdigit", "isalpha", "isalnum", "zfill", "ljust", "rjust", "removeprefix", "removesuffix"}
)

#: factories whose positional arguments are the shape: `torch.ones(1)` holds one element
#: (`torch.full` takes the shape first, then the fill value)
SIZED_FACTORIES = frozenset({"torch.ones", "torch.zeros", "torch.empty", "torch.rand", "torch.randn", "torch.full"})
#: constructors from data: `torch.tensor(0.5)` and `torch.tensor([flag])` hold one element
DATA_CONSTRUCTORS = frozenset({"torch.tensor", "torch.as_tensor", "torch.scalar_tensor"})
#: tensor methods that keep the number of elements (casts, copies, moves): a one-element
#: tensor stays one (`torch.ones(1).int()`)
ELEMENT_COUNT_PRESERVING_METHODS = frozenset(
    {"int", "long", "float", "double", "half", "bool", "to", "cpu", "cuda", "detach", "clone", "type_as", "neg", "abs"}
)
