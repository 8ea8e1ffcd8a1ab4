"""How often the cyclic garbage collector runs while files are checked.

Kept apart from `engine` (which imports libcst) so that the command line can hold the
setting for a whole run before it knows whether any file needs libcst.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator

#: young-generation allocations between cyclic collections while a file is checked
#: (CPython's default is 700). A parse allocates hundreds of thousands of nodes that live
#: as long as the file's analysis, so at 700 the collector runs thousands of times per run
#: and keeps promoting, then re-scanning, live trees: about a tenth of the CPU time of a
#: `--no-verify` run over timm (2,096 young, 190 middle and 17 full collections for half
#: its files; 154, 13 and 1 at 10,000). What is garbage is still collected, a little later.
GC_YOUNG_THRESHOLD = 10_000


@contextlib.contextmanager
def fewer_collections(threshold: int = GC_YOUNG_THRESHOLD) -> Iterator[None]:
    """Raise the collector's young-generation threshold to `threshold` for the block
    (never lower it), and put the old thresholds back after.

    Nested blocks cost nothing: the command line holds one around its whole serial run
    (`cli.runner.run_jobs`), so `engine.check_source`'s own block per file finds the
    threshold already raised, and the collection that follows the drop back to the old
    threshold happens once per run instead of once per file."""
    old = gc.get_threshold()
    if old[0] >= threshold:
        yield
        return
    gc.set_threshold(threshold, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def raise_young_threshold(threshold: int = GC_YOUNG_THRESHOLD) -> None:
    """`fewer_collections` for the rest of the process (a pool worker, which only checks files)."""
    old = gc.get_threshold()
    if old[0] < threshold:
        gc.set_threshold(threshold, *old[1:])
