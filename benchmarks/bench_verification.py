"""Verification time per patch: warm worker vs. a fresh ``python`` per side.

    python benchmarks/bench_verification.py [--repeat 3]
    python benchmarks/bench_verification.py --scaling [--sizes 20,50,100]

Both variants run the same harness (same probes, same input binding) on the same
patches; the two sides of a patch run in parallel in both. "warm" is
`autograd_fix.verification.verify_pair` on one `Verifier` (fork of a process that
imported torch once); "cold" starts ``python`` for each side, which imports torch, runs
the side and saves its record. Overhead = wall time per patch minus the slower side's
own run time as measured inside the run (the code's own cost). Prints one table and the
ratio; the issue's target is at most 0.3 s overhead per patch on CPU.

`--scaling` times `autograd-fix --diff` (the whole pipeline: check, plan, verify every
patch on top of the accepted ones, compose) on one generated file with N fixable findings
for each N, and prints the cost per patch and the ratio of the largest N to the smallest:
the cost of one patch must not grow with the number of findings in its file.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

from autograd_fix.verification import Verifier, find_units, verify_pair

MODEL = """
import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))
"""

EVAL = MODEL + """

def evaluate(model, loader):
    model.eval()
    outs = []
    for x, y in loader:
        outs.append(model(x))
    return torch.cat(outs)
"""

TRAIN = MODEL + """

torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
batches = [(torch.randn(16, 32), torch.randint(0, 10, (16,))) for _ in range(8)]
for x, y in batches:
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
"""

EPOCH = MODEL + """

def train_epoch(model, loader, optimizer, criterion):
    total = 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss
    return total / len(loader)
"""

SCALE = """
import torch


class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x * factor

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.factor
"""

PATCHES = [
    ("AGF001 eval loop", EVAL, EVAL.replace("    for x, y in loader:\n        outs.append(model(x))",
                                            "    with torch.no_grad():\n        for x, y in loader:\n            outs.append(model(x))"),
     ("outputs_equal", "grads_untouched", "retained_graph_lower_if_any")),
    ("AGF002 training script", TRAIN, TRAIN.replace("    loss = F.cross", "    optimizer.zero_grad()\n    loss = F.cross"),
     ("step_grads_match_contributions",)),
    ("AGF006 epoch loss", EPOCH, EPOCH.replace("total += loss", "total += loss.detach()"),
     ("accumulated_values_equal", "retained_graph_not_higher")),
    ("AGF004 Function", SCALE, SCALE.replace("return grad_output * ctx.factor", "return grad_output * ctx.factor, None"),
     ("original_error_gone", "gradcheck_passes")),
]

COLD_SIDE = textwrap.dedent(
    """
    import json, sys
    import torch
    from autograd_fix.verification.harness import run_side, saved
    from autograd_fix.verification.protocol import SideSpec
    spec = json.loads(sys.stdin.read())
    target = spec.pop("record")
    torch.save(saved(run_side(SideSpec(**spec, isolate=False))), target)
    """
)


def run_cold(original: str, rewritten: str, checks: tuple[str, ...]) -> float:
    """Both sides as fresh python processes, in parallel; wall seconds."""
    (unit,) = find_units(original, rewritten)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        procs = []
        for index, source in enumerate((unit.original, unit.rewritten)):
            spec = {"kind": unit.kind, "source": source, "qualname": unit.qualname, "free_names": list(unit.free_names),
                    "path": "<bench>", "checks": list(checks), "device": "cpu", "record": os.path.join(folder, f"{index}.pt")}
            proc = subprocess.Popen([sys.executable, "-c", COLD_SIDE], stdin=subprocess.PIPE, cwd=folder,
                                    env={**os.environ, "OMP_NUM_THREADS": "1"})
            proc.stdin.write(json.dumps(spec).encode())
            proc.stdin.close()
            procs.append(proc)
        for proc in procs:
            if proc.wait() != 0:
                raise RuntimeError("cold side failed")
    return time.perf_counter() - started


def scaling_source(count: int) -> str:
    """One module with `count` evaluation functions, each an AGF001 finding with a fix."""
    functions = [
        f"""

def evaluate_{index}(model, loader):
    model.eval()
    outputs = []
    for x, y in loader:
        outputs.append(model(x) * {index + 1})
    return torch.cat(outputs)
"""
        for index in range(count)
    ]
    return MODEL + "".join(functions)


def run_scaling(sizes: list[int]) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            path = os.path.join(folder, f"evaluate_{size}.py")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(scaling_source(size))
            started = time.perf_counter()
            completed = subprocess.run(
                [sys.executable, "-m", "autograd_fix", "--diff", "--format", "json", "--device", "cpu", path],
                capture_output=True, text=True, cwd=folder,
            )
            wall = time.perf_counter() - started
            report = json.loads(completed.stdout)
            verdicts = [f["verification"]["verdict"] for f in report["findings"] if f["verification"]]
            rows.append((size, len(report["findings"]), verdicts.count("accepted"), len(verdicts), wall))
    print(f"{'findings':>8} {'accepted':>9} {'verified':>9} {'wall s':>8} {'s/patch':>8}")
    for size, found, accepted, verified, wall in rows:
        print(f"{found:>8} {accepted:>9} {verified:>9} {wall:>8.1f} {wall / max(verified, 1):>8.3f}")
    (small, *_), (large, *_) = rows[0], rows[-1]
    ratio = rows[-1][4] / rows[0][4]
    print(f"verifying {large} costs {ratio:.1f}x what verifying {small} costs (linear would be {large / small:.1f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scaling", action="store_true", help="time --diff on files with N fixable findings")
    parser.add_argument("--sizes", default="20,50,100", help="N values for --scaling")
    args = parser.parse_args()
    if args.scaling:
        run_scaling([int(size) for size in args.sizes.split(",")])
        return

    started = time.perf_counter()
    verifier = Verifier()
    startup = time.perf_counter() - started
    rows = []
    try:
        for name, original, rewritten, checks in PATCHES:
            warm, own, cold = [], [], []
            verdict = None
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                verdict = verify_pair(original, rewritten, checks=checks, device="cpu", verifier=verifier)
                warm.append(time.perf_counter() - t0)
                own.append(max(u.evidence[side]["measured"]["duration_s"] for u in verdict.units for side in ("original", "rewritten")))
                cold.append(run_cold(original, rewritten, checks))
            assert verdict is not None
            rows.append((name, verdict.verdict, statistics.median(warm), statistics.median(own), statistics.median(cold)))
    finally:
        verifier.close()

    print(f"worker start-up (import torch + warm-up, once per session): {startup:.2f} s")
    print(f"{'patch':<24} {'verdict':<10} {'warm s':>8} {'own run s':>10} {'overhead s':>11} {'cold s':>8} {'cold/warm':>10}")
    for name, verdict, warm, own, cold in rows:
        print(f"{name:<24} {verdict:<10} {warm:>8.3f} {own:>10.3f} {warm - own:>11.3f} {cold:>8.3f} {cold / warm:>10.1f}")
    total_warm = sum(r[2] for r in rows)
    total_cold = sum(r[4] for r in rows)
    overhead = statistics.mean(r[2] - r[3] for r in rows)
    print(f"mean overhead per patch (warm): {overhead:.3f} s; cold/warm ratio over all patches: {total_cold / total_warm:.1f}x")


if __name__ == "__main__":
    main()
