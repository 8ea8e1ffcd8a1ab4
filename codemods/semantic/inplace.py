"""Is this call an in-place operation that changes the values of its receiver?

One answer for every rule (issue 18: AGF003 and AGF009 disagreed on `detach_`,
`retain_grad_`, `pin_memory_` and `record_stream_`). The names come from the vocabulary
module (`codemods/torch_api.py`):
- YES: a public in-place method of `torch.Tensor` (`add_`, `copy_`, `zero_`) that writes
  values, so autograd's version counter moves and a write through `.data` bypasses it;
- NO: no trailing underscore, a private name, an imported function (`nn.init.zeros_(w)`
  is a function of `torch.nn.init`, not a method of a tensor), an in-place method that
  changes no value (`requires_grad_`, `detach_`, `share_memory_`), or an underscore
  spelling of a torch method that exists only without one (`retain_grad_`);
- UNKNOWN: another name ending in `_` (a user method, one a newer torch added).
"""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.semantic.answer import Answer
from autograd_fix.codemods.torch_api import NOT_INPLACE_SPELLINGS, TENSOR_INPLACE_METHODS, VALUE_PRESERVING_INPLACE_METHODS


def inplace_method(method: str) -> Answer:
    """Does calling a tensor's method `method` change the tensor's values in place?"""
    if not method.endswith("_") or method.startswith("_"):
        return Answer.NO
    if method in VALUE_PRESERVING_INPLACE_METHODS or method in NOT_INPLACE_SPELLINGS:
        return Answer.NO
    return Answer.YES if method in TENSOR_INPLACE_METHODS else Answer.UNKNOWN


def is_inplace_call(call: cst.Call, imports: ImportIndex) -> Answer:
    """Is `call` (`x.add_(y)`) a method call that changes its receiver's values in place?"""
    if type(call.func) is not cst.Attribute or imports.qualified_name(call.func) is not None:
        return Answer.NO
    return inplace_method(call.func.attr.value)
