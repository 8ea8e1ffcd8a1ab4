"""How the sandbox's limits and parallelism behave in time, as ratios.

    python benchmarks/bench_sandbox.py [--repeat 3]

These were wall-clock bounds inside unit tests (tests/test_sandbox.py), where a loaded
2-core machine made them flaky; the behaviour stays tested there (the verdicts), the
timing is measured here, side by side in one run:

- parallel patches: four independent patches whose runs each sleep 1 s, verified with
  ``jobs=4`` and with ``jobs=1``. The ratio ``jobs=4 / jobs=1`` is about 0.25-0.35 when
  patches run in parallel and about 1.0 when they run one after another.
- a hang: the original loops forever under ``timeout=1.5``; the ratio of the verdict's
  wall time to the timeout says how long the kill and the verdict take beyond it.
- a memory blow-up under ``memory_mb=300``, next to a run of the same script that stops
  by itself at the same size: the ratio is the cost of being stopped by the memory watch.

- isolation: a small patch (a script that imports torch and takes one backward step)
  verified by a worker whose runs are confined (namespaces, the allowlisted file system,
  a memory cgroup where one can be made) and by one with ``AUTOGRAD_FIX_NO_NAMESPACES=1``;
  the ratio confined / unconfined is the cost of isolation per patch (two runs).

Medians of `--repeat` rounds, the variants alternating within each round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from autograd_fix.verification import Verifier, verify_many, verify_pair

BASE = "import torch\nx = torch.ones(3)\ntotal = float(x.sum())\n"
SLOW = BASE + "import time\ntime.sleep(1.0)\n"
HOG = BASE + "chunks = []\nwhile True:\n    chunks.append(torch.ones(16 * 1024 * 1024))\n"
BOUNDED = BASE + "chunks = []\nfor _ in range(4):\n    chunks.append(torch.ones(16 * 1024 * 1024))\n"


def _timed(call) -> float:
    began = time.perf_counter()
    call()
    return time.perf_counter() - began


def parallel_round(verifier: Verifier) -> tuple[float, float]:
    pairs = [{"original": SLOW, "rewritten": SLOW + f"marker = {i}\n"} for i in range(4)]
    wide = _timed(lambda: verify_many(pairs, jobs=4, verifier=verifier, timeout=10))
    narrow = _timed(lambda: verify_many(pairs, jobs=1, verifier=verifier, timeout=10))
    return wide, narrow


def hang_round(verifier: Verifier) -> float:
    hang = BASE + "while True:\n    pass\n"
    return _timed(lambda: verify_pair(hang, BASE + "total += 0\n" + hang[len(BASE):], verifier=verifier, timeout=1.5))


def memory_round(verifier: Verifier) -> tuple[float, float]:
    stopped = _timed(lambda: verify_pair(HOG, HOG + "total = 2\n", verifier=verifier, memory_mb=300, timeout=20))
    bounded = _timed(lambda: verify_pair(BOUNDED, BOUNDED + "total = 2\n", verifier=verifier, memory_mb=2000, timeout=20))
    return stopped, bounded


STEP = BASE.replace("torch.ones(3)", "torch.ones(3, requires_grad=True)") + "(x * 2).sum().backward()\ngrad = x.grad\n"


def isolation_round(confined: Verifier, unconfined: Verifier, patches: int = 5) -> tuple[float, float]:
    """Seconds for `patches` patches verified one at a time, confined then not."""
    pairs = [{"original": STEP, "rewritten": STEP + f"marker = {i}\n"} for i in range(patches)]
    return tuple(_timed(lambda v=v: verify_many(pairs, jobs=1, verifier=v, timeout=20)) for v in (confined, unconfined))


def _unconfined_verifier() -> Verifier:
    from autograd_fix.verification.namespaces import DISABLE_VARIABLE

    os.environ[DISABLE_VARIABLE] = "1"
    try:
        return Verifier()
    finally:
        del os.environ[DISABLE_VARIABLE]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    wide, narrow, hang, stopped, bounded, confined, unconfined = [], [], [], [], [], [], []
    with Verifier() as verifier, _unconfined_verifier() as plain:
        for v in (verifier, plain):
            verify_pair(BASE, BASE + "total = total * 1\n", verifier=v)  # warm
        for _ in range(args.repeat):
            c, u = isolation_round(verifier, plain)
            confined.append(c)
            unconfined.append(u)
            w, n = parallel_round(verifier)
            wide.append(w)
            narrow.append(n)
            hang.append(hang_round(verifier))
            s, b = memory_round(verifier)
            stopped.append(s)
            bounded.append(b)
    med = statistics.median
    print(f"parallel: jobs=4 {med(wide):.2f} s, jobs=1 {med(narrow):.2f} s, ratio {med(wide) / med(narrow):.2f}")
    print(f"hang: verdict after {med(hang):.2f} s for a 1.5 s timeout, ratio {med(hang) / 1.5:.2f}")
    print(f"memory: stopped at 300 MB in {med(stopped):.2f} s, bounded run {med(bounded):.2f} s, "
          f"ratio {med(stopped) / med(bounded):.2f}")
    print(f"isolation: 5 patches confined {med(confined):.2f} s, unconfined {med(unconfined):.2f} s, "
          f"ratio {med(confined) / med(unconfined):.2f}")


if __name__ == "__main__":
    main()
