"""Regressions found by verifying fixes in real repositories (benchmarks/verify_real_repos.py).

Each script is written for these tests in the shape of the code that showed the problem;
see benchmarks/REAL_REPOS.md for the repositories and verdicts.
"""

from __future__ import annotations

import textwrap

import pytest

from autograd_fix.verification import verify_pair




# A GPT-style training script at top level that times each iteration and estimates
# throughput from the timing, as small-LM training scripts do; AGF012 modernises its
# GradScaler. Clock-derived globals (`dt`, `tokens_per_sec`, `mfu`) differ between any
# two runs and say nothing about the patch.
TIMED_TRAINING = """
import time

import torch
from torch import nn

torch.manual_seed(0)
vocab, block, batch = 17, 8, 4
model = nn.Sequential(nn.Embedding(vocab, 16), nn.Linear(16, vocab))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
scaler = SCALER
data = torch.randint(0, vocab, (256,))


def get_batch():
    ix = torch.randint(len(data) - block - 1, (batch,))
    x = torch.stack([data[i : i + block] for i in ix])
    y = torch.stack([data[i + 1 : i + 1 + block] for i in ix])
    return x, y


t0 = time.time()
running_mfu = -1.0
for iter_num in range(LR_ITERS):
    x, y = get_batch()
    logits = model(x)
    loss = nn.functional.cross_entropy(logits.view(-1, vocab), y.view(-1))
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    t1 = time.time()
    dt = t1 - t0
    t0 = t1
    tokens_per_sec = batch * block / max(dt, 1e-9)
    mfu = 6 * sum(p.numel() for p in model.parameters()) * tokens_per_sec / 312e12
    running_mfu = mfu if running_mfu == -1.0 else 0.9 * running_mfu + 0.1 * mfu
    lossf = loss.item()
    print(f"iter {iter_num}: loss {lossf:.4f}, time {dt * 1000:.2f}ms, mfu {running_mfu * 100:.2f}%")
"""


def script(scaler: str, iters: int = 3) -> str:
    return textwrap.dedent(TIMED_TRAINING).replace("SCALER", scaler).replace("LR_ITERS", str(iters))


OLD_SCALER = "torch.cuda.amp.GradScaler(enabled=False)"
NEW_SCALER = 'torch.amp.GradScaler("cuda", enabled=False)'


def test_timing_and_throughput_globals_do_not_reject_a_right_fix(verifier):
    verdict = verify_pair(script(OLD_SCALER), script(NEW_SCALER), rule="AGF012", verifier=verifier, timeout=30)

    assert verdict.verdict == "accepted", verdict.reason
    assert "outputs equal" in verdict.reason


def test_a_real_difference_next_to_timing_globals_is_still_rejected(verifier):
    # Two training steps fewer change the loss and the weights: not hidden by the clock-derived
    # names. (One step fewer, 3 -> 2, is past the bounded run's stop 2 steps after the changed
    # code: both runs make 2 steps and the verdict is `shortened differently`, from the items
    # the stopped loop had left.)
    verdict = verify_pair(script(OLD_SCALER), script(NEW_SCALER, iters=1), rule="AGF012", verifier=verifier, timeout=30)

    assert verdict.verdict == "rejected", verdict.reason
    assert "outputs differ" in verdict.reason
    assert "dt:" not in verdict.reason and "mfu" not in verdict.reason
    one_fewer = verify_pair(script(OLD_SCALER), script(NEW_SCALER, iters=2), rule="AGF012", verifier=verifier, timeout=30)
    assert one_fewer.verdict == "rejected" and "shortened differently" in one_fewer.reason, one_fewer.reason
