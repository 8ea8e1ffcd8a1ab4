"""Static-pass throughput: ast.parse, libcst parse, autograd-fix, and TorchFix, side by side.

All tools run in this one invocation over the same files, one process each, sequentially
(no pools), so the ratios are comparable even on a noisy machine. TorchFix pins an old
libcst (<1.6), so it runs in its own interpreter, given with `--torchfix-python`
(e.g. a venv made with `python -m venv /tmp/tf && /tmp/tf/bin/pip install torchfix`);
without it TorchFix is left out.

Corpora (made from what is installed, nothing downloaded):
- torch-using code: `.py` files of the installed `torch` package that mention "torch";
- code with no torch use: standard-library modules that never mention "torch".

    python benchmarks/bench_static.py [--files 400] [--torchfix-python /tmp/tf/bin/python]
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import libcst as cst

from autograd_fix.codemods.engine import EngineError, check_source
from autograd_fix.codemods.registry import all_rules

TORCHFIX_TIMER = r"""
import contextlib, io, json, sys, time
import libcst as cst
from libcst import codemod
from torchfix.torchfix import TorchCodemod, TorchCodemodConfig, process_error_code_str
files = json.load(sys.stdin)
config = TorchCodemodConfig(select=list(process_error_code_str(None)))
start = time.perf_counter()
for path in files:
    text = open(path, encoding="utf-8", errors="replace").read()
    if "torch" not in text:
        continue  # TorchFix's own prefilter
    command = TorchCodemod(codemod.CodemodContext(filename=path), config)
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            command.transform_module(cst.parse_module(text))
        except Exception:
            pass
print(time.perf_counter() - start)
"""


def corpus(kind: str, limit: int) -> list[Path]:
    if kind == "torch":
        import torch

        root = Path(torch.__file__).parent
        candidates = sorted(root.rglob("*.py"))
        wanted = lambda text: "torch" in text  # noqa: E731
    else:
        root = Path(sysconfig.get_paths()["stdlib"])
        candidates = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts and "test" not in p.parts)
        wanted = lambda text: "torch" not in text  # noqa: E731
    chosen = []
    for path in candidates:
        try:
            text = path.read_text(encoding="utf-8")
            ast.parse(text)
        except (UnicodeDecodeError, SyntaxError, ValueError):
            continue
        if wanted(text):
            chosen.append(path)
        if len(chosen) == limit:
            break
    return chosen


def timed(function, texts: list[tuple[str, str]]) -> float:
    start = time.perf_counter()
    for path, text in texts:
        function(path, text)
    return time.perf_counter() - start


def run_autograd_fix(path: str, text: str) -> None:
    try:
        check_source(text, all_rules(), path=path, compute_fix=False)
    except EngineError:
        pass


def measure(files: list[Path], torchfix_python: str | None) -> dict[str, float]:
    texts = [(str(p), p.read_text(encoding="utf-8")) for p in files]
    all_rules()  # import the rules before timing
    results = {
        "ast.parse": timed(lambda p, t: ast.parse(t), texts),
        "libcst parse": timed(lambda p, t: cst.parse_module(t), texts),
        "autograd-fix": timed(run_autograd_fix, texts),
    }
    if torchfix_python:
        completed = subprocess.run(
            [torchfix_python, "-c", TORCHFIX_TIMER],
            input=json.dumps([p for p, _ in texts]),
            capture_output=True,
            text=True,
            check=True,
        )
        results["TorchFix"] = float(completed.stdout.strip().splitlines()[-1])
    return results


def report(title: str, files: list[Path], results: dict[str, float]) -> None:
    lines = sum(p.read_text(encoding="utf-8").count("\n") for p in files)
    print(f"\n{title}: {len(files)} files, {lines} lines")
    print(f"{'tool':<14}{'files/s':>10}{'ms/1k lines':>13}{'x ast.parse':>13}")
    base = results["ast.parse"]
    for tool, seconds in results.items():
        print(f"{tool:<14}{len(files) / seconds:>10.0f}{seconds * 1000 / (lines / 1000):>13.2f}{seconds / base:>13.2f}")
    if "TorchFix" in results:
        print(f"autograd-fix throughput = {results['TorchFix'] / results['autograd-fix']:.1f}x TorchFix's")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=400)
    parser.add_argument("--torchfix-python", default=None)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, libcst parse in-process; {len(all_rules())} rules")
    torch_files = corpus("torch", args.files)
    report("torch-using code (torch package sources)", torch_files, measure(torch_files, args.torchfix_python))
    plain_files = corpus("plain", args.files)
    report("code with no torch use (stdlib)", plain_files, measure(plain_files, args.torchfix_python))


if __name__ == "__main__":
    main()
