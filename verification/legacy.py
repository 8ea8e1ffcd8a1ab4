"""Scripts written for PyTorch before 0.4, run as that PyTorch read them in one place:
`loss.data[0]`.

Before 0.4 a loss was a one-element tensor and `loss.data[0]` its number; since 0.5
indexing a 0-dim tensor raises "invalid index of a 0-dim tensor", so a 2017-era script
stops at its first logging line, before any code a patch changed. Both sides then stop at
the same error and nothing can be compared, whatever the patch (on code nobody here
wrote, that was most of the unverified verdicts not caused by a missing package).

When the original run stops at that error, the pair runs again with 0-dim indexing read
as the script meant it: `x[0]` (or `x[-1]`) of a 0-dim tensor is `x.item()`, or the
tensor itself where it requires grad (a Variable's index kept its graph). That applies
to the whole original, which is old code read as written, and to the rewritten run
except on the lines the patch changed: a rewrite must be valid for the PyTorch it runs
on where it rewrote something (a fix to `loss.detach()[0]` still raises there and is
rejected, while `loss.item()` runs and is compared with the original's number). The
verdict says the reading was used. Everything else runs as this PyTorch runs it.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from .protocol import RunRecord

#: the message PyTorch (0.5 and later) raises for `x[0]` on a 0-dim tensor
ZERO_DIM_INDEX_ERROR = "invalid index of a 0-dim tensor"
#: how the verdict names the reading
NOTE = "0-dim `x[0]` read as `x.item()` as PyTorch before 0.4 read `loss.data[0]`"


def stopped_at_zero_dim_index(record: "RunRecord | None") -> bool:
    """Whether a run stopped at PyTorch's 0-dim indexing error."""
    exception = record.exception if record is not None else None
    return exception is not None and exception.type == "IndexError" and ZERO_DIM_INDEX_ERROR in exception.message


@contextmanager
def zero_dim_index_as_item(path: str, exempt: list[list[int]] | None) -> Iterator[list[int]]:
    """`x[0]` and `x[-1]` of a 0-dim tensor give `x.item()` (the tensor itself when it
    requires grad) while the block runs, except on the `exempt` lines (the changed hunks'
    line numbers, `coverage.changed_lines`) of the file `path`. Yields a list that
    counts the readings."""
    import torch

    original = torch.Tensor.__getitem__
    used = [0]
    lines = {line for hunk in exempt or () for line in hunk}

    def exempted(frame: Any) -> bool:
        return frame is not None and frame.f_lineno in lines and frame.f_code.co_filename == path

    def getitem(self: torch.Tensor, index: Any) -> Any:
        if (
            type(index) is int and index in (0, -1) and self.dim() == 0
            and not exempted(sys._getframe(1))
        ):
            used[0] += 1
            return self if self.requires_grad else self.item()
        return original(self, index)

    torch.Tensor.__getitem__ = getitem  # type: ignore[method-assign]
    try:
        yield used
    finally:
        torch.Tensor.__getitem__ = original  # type: ignore[method-assign]
