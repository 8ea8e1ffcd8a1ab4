"""AGF014 checkpoint-without-use-reentrant: `torch.utils.checkpoint.checkpoint(...)` without `use_reentrant`."""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.model import Applicability, Edit, Fix
from autograd_fix.codemods.rule import Contract, Rule
from autograd_fix.codemods.torch_api import CHECKPOINT_FUNCTIONS, USE_REENTRANT_SINCE
from autograd_fix.codemods.torch_version import supports


class CheckpointWithoutUseReentrant(Rule):
    """
    ## What it does
    Finds calls of `torch.utils.checkpoint.checkpoint` (and `checkpoint_sequential`)
    that do not pass `use_reentrant`, and adds `use_reentrant=False`.

    ## Why is this bad?
    Without the argument PyTorch picks the old reentrant implementation (and warns since
    2.4 that the default will change). The reentrant form silently gives the parameters
    inside the checkpointed function no gradient when none of its tensor *inputs*
    requires grad (the first block of a network fed raw images, a frozen embedding's
    output), it does not work with `torch.autograd.grad` or `backward(inputs=...)`, and it
    ignores keyword arguments. The non-reentrant form has none of these limits and is the
    one PyTorch recommends (TorchFix's TOR003).

    ## Example
    ```python
    from torch.utils.checkpoint import checkpoint

    def forward(self, x):
        return checkpoint(self.block, x)
    ```

    ## Use instead
    ```python
        return checkpoint(self.block, x, use_reentrant=False)
    ```

    ## Fix safety
    Unsafe. Where the reentrant form worked, both forms compute the same gradients; where
    it gave parameters no gradient, the fix changes the gradients on purpose (that is the
    bug). The two also differ in how they replay random state and in hooks that count
    calls. Calls that pass `**kwargs` (which may carry `use_reentrant`) are left alone, and
    so is a `checkpoint` that is not `torch.utils.checkpoint`'s (a user function, a
    Lightning or DeepSpeed wrapper): matching is by qualified name. Below torch 1.11
    (`target-torch`), where `use_reentrant` does not exist, the rule stays silent.

    ## Verification
    Outputs equal; gradients equal, or, where they differ, the rewritten ones match
    finite differences and the original ones do not (the reentrant form dropped them).
    """

    code = "AGF014"
    name = "checkpoint-without-use-reentrant"
    safety = Applicability.UNSAFE
    message = "`checkpoint` without `use_reentrant`: the reentrant default drops parameter gradients when no input requires grad"
    contract = Contract(
        description="outputs equal; gradients equal, or corrected (rewritten matches finite differences, original does not)",
        checks=("equal_or_gradients_corrected",),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.imports.qualified_name(node.func) not in CHECKPOINT_FUNCTIONS:
            return
        if not supports(self.context.target_torch, USE_REENTRANT_SINCE):
            return
        if any(arg.star == "**" or (arg.keyword is not None and arg.keyword.value == "use_reentrant") for arg in node.args):
            return
        fix = Fix(Applicability.UNSAFE, (Edit(node, _add_use_reentrant),), "pass `use_reentrant=False`")
        self.report(node, fix=fix)


def _add_use_reentrant(updated: cst.CSTNode) -> cst.CSTNode:
    assert type(updated) is cst.Call
    args = list(updated.args)
    added = cst.Arg(
        keyword=cst.Name("use_reentrant"),
        value=cst.Name("False"),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    if args:
        last = args[-1]
        if type(last.comma) is cst.Comma:
            # a trailing comma (often before a newline): the new argument goes after it, keeping the layout
            added = added.with_changes(comma=last.comma)
            between = args[-2].comma if len(args) > 1 and type(args[-2].comma) is cst.Comma else last.comma
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=between.whitespace_after))
        else:
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return updated.with_changes(args=[*args, added])
