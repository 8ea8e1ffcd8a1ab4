"""Torch API names: the one vocabulary module (issue 18) that rules and analyses share.

Rules match these through `ImportIndex.qualified_name`, never through source text, so
`import torch as T; T.log(1 + x)` and `from torch import log` are the same call. Names
of the torch API that an analysis needs go here, so that what torch does is said once.
(Older sets still live beside the analyses that first needed them, such as
`semantic/gradmode.py`'s grad-mode context managers and `semantic/module_calls.py`'s
`MODULE_API_METHODS`; they move here as they are touched.)
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

#: modules whose functions return Python values, never a tensor (`random.randint(0, 1)`)
PYTHON_VALUE_MODULES = frozenset({"random", "math", "statistics"})

#: tensor methods and torch functions that rescale a value (a loss or a gradient) by a
#: factor: `loss.div(k)`, `p.grad.mul_(s)`, `torch._foreach_div_(grads, k)` (AGF019)
SCALING_METHODS = frozenset({"div", "div_", "mul", "mul_", "divide", "divide_", "multiply", "multiply_", "true_divide", "true_divide_"})
SCALING_FUNCTIONS = frozenset(
    {"torch.div", "torch.mul", "torch.divide", "torch.multiply", "torch.true_divide", "torch._foreach_div_", "torch._foreach_mul_"}
)
#: loss arguments that make a loss a sum over its elements, not a mean (keyword -> the
#: values, as source text): summed over micro-batches it is the big batch's sum
SUM_REDUCTIONS = MappingProxyType({"reduction": frozenset({"'sum'", '"sum"'}), "size_average": frozenset({"False"})})
