"""Torch API names: the one vocabulary module issue 18 asks for.

Names of the torch API that an analysis needs go here, so that what torch does is said
once. (Older sets still live beside the analyses that first needed them, such as
`semantic/gradmode.py`'s grad-mode context managers and `semantic/module_calls.py`'s
`MODULE_API_METHODS`; they move here as they are touched.)
"""

from __future__ import annotations

#: nn.Module methods that return the module itself: `ActorCritic().to(device)` is still
#: an `ActorCritic`
MODULE_SELF_RETURNING_METHODS = frozenset(
    {"to", "cuda", "cpu", "float", "double", "half", "bfloat16", "train", "eval", "requires_grad_", "share_memory",
     "type", "apply", "to_empty", "ipu", "xpu", "mtia"}
)

#: modules whose functions return Python values, never a tensor (`random.randint(0, 1)`)
PYTHON_VALUE_MODULES = frozenset({"random", "math", "statistics"})
