"""Bounded runs of real, unmodified scripts (issue 17, item 1).

A training script runs for hours at its defaults; verification runs both sides of a
patch with every loop that trains (a loop whose iterations call a model with
parameters, a backward or an optimizer step) capped at a few iterations, identically on
both sides, while loops that only prepare data run in full. The verdict says what was
shortened.
"""

from __future__ import annotations

import builtins
import textwrap
import time
from pathlib import Path

import pytest
import torch

from autograd_fix.codemods.registry import rule_by_code
from autograd_fix.verification import ConfigError, load_config, verify_pair
from autograd_fix.verification.bounded import DEFAULT_CAP, DEFAULT_STOP_AFTER, Bounds

AGF001 = tuple(rule_by_code("AGF001").contract.checks)

# A script as pytorch/examples write them: data prepared in a loop, an epoch loop of
# 10,000 epochs around a batch loop, and an evaluation that keeps graphs (AGF001).
LONG = """\
import torch
from torch import nn

torch.manual_seed(1)

def make_data(n):
    xs, ys = [], []
    for i in range(n):                       # data preparation: must run in full
        x = torch.randn(8)
        xs.append(x)
        ys.append(int(x.sum() > 0))
    return torch.stack(xs), torch.tensor(ys)

X, Y = make_data(512)
loader = [(X[i:i + 16], Y[i:i + 16]) for i in range(0, 512, 16)]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 16), nn.Linear(16, 2)])

    def forward(self, x):
        for layer in self.layers:           # inside a forward: never capped
            x = torch.tanh(layer(x))
        return x


def evaluate(model, batches):
    model.eval()
    outputs, labels = [], []
    for x, y in batches:
        outputs.append(model(x))
        labels.append(y)
    scores = torch.cat(outputs)
    return (scores.argmax(1) == torch.cat(labels)).float().mean()


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(10000):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    accuracy = evaluate(model, loader)
    print(f"epoch {epoch}: accuracy {accuracy.item():.4f}")
"""

RIGHT = LONG.replace(
    "    for x, y in batches:\n        outputs.append(model(x))\n        labels.append(y)\n",
    "    with torch.no_grad():\n        for x, y in batches:\n            outputs.append(model(x))\n            labels.append(y)\n",
)
WRONG = LONG.replace(
    "    for x, y in batches:\n        outputs.append(model(x))\n        labels.append(y)\n",
    "    with torch.no_grad():\n        for x, y in batches:\n            outputs.append(model(x * 0.5))\n            labels.append(y)\n",
)


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "proj"
    for name, text in {"pyproject.toml": "[project]\nname = 'toy'\n", **files}.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return root


def test_a_ten_thousand_epoch_script_is_verified_in_seconds(tmp_path, verifier):
    assert RIGHT != LONG and WRONG != LONG
    root = _project(tmp_path, {"train.py": LONG})
    began = time.perf_counter()
    verdict = verify_pair(LONG, RIGHT, path=str(root / "train.py"), checks=AGF001, verifier=verifier)
    took = time.perf_counter() - began
    assert verdict.verdict == "accepted", verdict.reason
    assert verdict.driver == "script driver (top-level code)"
    # what was shortened, in the verdict: the batch loop of the first epoch, then, the
    # changed evaluation having returned (AGF001's contract is decided by then), the stop
    assert "stopped when the changed evaluate() returned (train.py:29)" in verdict.reason, verdict.reason
    assert f"`for x, y` at train.py:43 capped at {DEFAULT_CAP} iterations" in verdict.reason, verdict.reason
    assert "`for epoch`" not in verdict.reason  # the stop came before the epoch loop's cap
    # the evaluation (forwards only), the data preparation, the loop in forward: not cut
    assert "train.py:32" not in verdict.reason and "train.py:8 " not in verdict.reason and "train.py:24" not in verdict.reason
    assert took < 15, took
    wrong = verify_pair(LONG, WRONG, path=str(root / "train.py"), checks=AGF001, verifier=verifier)
    assert wrong.verdict == "rejected", wrong.reason
    assert wrong.driver == "script driver (top-level code)"
    assert "capped at" in wrong.reason


def test_an_evaluation_after_the_training_loop_still_runs(tmp_path, verifier):
    """The changed code sits after a `while True` training loop that never seeds."""
    script = textwrap.dedent(
        """\
        import torch
        from torch import nn

        model = nn.Linear(4, 2)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        step = 0
        while True:
            x = torch.randn(8, 4)
            loss = model(x).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step == 10 ** 9:
                break

        def validate():
            kept = []
            for _ in range(5):
                kept.append(model(torch.randn(8, 4)).sum())
            return torch.stack(kept)

        result = validate()
        """
    )
    fixed = script.replace(
        "    for _ in range(5):\n        kept.append(model(torch.randn(8, 4)).sum())\n",
        "    with torch.no_grad():\n        for _ in range(5):\n            kept.append(model(torch.randn(8, 4)).sum())\n",
    )
    assert fixed != script
    root = _project(tmp_path, {"loop.py": script})
    verdict = verify_pair(script, fixed, path=str(root / "loop.py"), checks=AGF001, verifier=verifier)
    assert verdict.verdict == "accepted", verdict.reason
    assert f"`while True` at loop.py:7 capped at {DEFAULT_CAP} iterations" in verdict.reason, verdict.reason
    assert "loop.py:19" not in verdict.reason  # the validation loop of 5 forwards runs in full


def _run(source: str, bounds: Bounds | None) -> dict:
    namespace: dict = {"__name__": "__main__"}
    torch.manual_seed(0)
    if bounds is None:
        exec(compile(source, "/nowhere/prep.py", "exec"), namespace)
        return namespace
    with bounds:
        exec(bounds.compile(source, "/nowhere/prep.py"), namespace)
    return namespace


def test_data_preparation_loops_run_in_full():
    source = textwrap.dedent(
        """\
        import torch
        from torch import nn
        data = []
        for i in range(300):
            data.append(torch.randn(3) * i)
        total = torch.stack(data).sum()
        squares = [i * i for i in range(50)]
        n = 0
        while n < 40:
            n += 1
        layers = [nn.Linear(3, 3) for _ in range(6)]
        net = nn.Sequential(*layers)
        out = net(torch.ones(2, 3))
        steps = 0
        for i in range(100):
            net(torch.ones(1, 3)).sum().backward()
            steps += 1
        """
    )
    plain = _run(source, None)
    bounds = Bounds(cap=3, outer_cap=2, root="/nowhere")
    capped = _run(source, bounds)
    assert len(capped["data"]) == 300 and torch.equal(capped["total"], plain["total"])
    assert capped["squares"] == plain["squares"] and capped["n"] == 40 and len(capped["layers"]) == 6
    assert torch.equal(capped["out"], plain["out"])  # the Sequential's own loop was not cut
    assert capped["steps"] == 3 and plain["steps"] == 100
    report = bounds.report()
    assert [(r["where"], r["label"], r["cap"]) for r in report] == [("prep.py:15", "for i", 3)], report
    assert not hasattr(builtins, "__autograd_fix_loop__")  # uninstalled with the context


def test_an_exhausted_loop_is_not_reported_as_capped():
    source = ("import torch\nnet = torch.nn.Linear(2, 2)\nfor x in [torch.ones(2)] * 3:\n    net(x).sum().backward()\n"
              "gen = (x for x in [1, 2, 3])\nfor x in gen:\n    net(torch.ones(2)).sum().backward()\n"
              "for x in range(3):\n    net(torch.ones(2))\n")
    bounds = Bounds(cap=3, outer_cap=2, root="/nowhere")
    _run(source, bounds)
    assert bounds.report() == []


def test_an_evaluation_the_patch_did_not_change_is_capped_and_one_it_changed_runs_in_full():
    """A sampling loop of 1,000 forwards after training (yunjey's language model) is not
    what an AGF010 fix changed: it keeps 3 iterations; the evaluation loop an AGF001 fix
    wrapped in no_grad runs in full."""
    source = ("import torch\nnet = torch.nn.Linear(2, 2)\nsamples = 0\nfor x in range(1000):\n"
              "    net(torch.ones(2))\n    samples += 1\nchecked = 0\nfor x in range(50):\n"
              "    net(torch.ones(2))\n    checked += 1\n")
    bounds = Bounds(cap=3, outer_cap=2, root="/nowhere", changed_file="/nowhere/prep.py", changed_lines=[9])
    ran = _run(source, bounds)
    assert ran["samples"] == 3 and ran["checked"] == 50
    assert [(r["where"], r["cap"], r["forward"]) for r in bounds.report()] == [("prep.py:4", 3, True)]
    assert _run(source, Bounds(cap=3, root="/nowhere", forward_cap=0))["samples"] == 1000  # forward-loop-cap = 0


def test_the_last_values_the_changed_lines_assign_are_outputs():
    """`total_loss = loss.item()` (keeps the last loss) against the running sum: no line
    of a 3-batch run prints it, but its last value differs (pytorch/examples
    word_language_model logs it every 200 batches)."""
    from autograd_fix.verification.bounded import observed_names
    from autograd_fix.verification.coverage import changed_lines

    script = ("import torch\nnet = torch.nn.Linear(2, 1)\nopt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
              "def train():\n    total_loss = 0.0\n    for step in range(1000):\n        opt.zero_grad()\n"
              "        loss = net(torch.randn(2)).pow(2).sum()\n        loss.backward()\n        opt.step()\n"
              "        total_loss += loss.item()\n        if step % 200 == 199:\n            print(total_loss)\n"
              "train()\n")
    wrong = script.replace("total_loss += loss.item()", "total_loss = loss.item()")
    hunks = changed_lines(script, wrong)
    assert observed_names(script, wrong, hunks) == ["train.total_loss"]
    seen = []
    for side, text in zip(hunks, (script, wrong)):
        bounds = Bounds(cap=3, root="/nowhere", changed_file="/nowhere/prep.py", changed_lines=side[0],
                        observe=["train.total_loss"])
        _run(text, bounds)
        seen.append(bounds.observed())
    key = "total_loss (last value assigned by the changed code in train)"
    assert set(seen[0]) == set(seen[1]) == {key}
    assert seen[0][key] != seen[1][key]


def test_caps_come_from_the_project_configuration(tmp_path, verifier):
    root = _project(tmp_path, {"train.py": LONG})
    (root / "pyproject.toml").write_text("[project]\nname = 'toy'\n[tool.autograd-fix.verify]\nloop-cap = 4\nouter-loop-cap = 1\n"
                                          "stop-after-change = 0\n")  # no stop: not after steps, not at the return
    config = load_config(str(root / "train.py"))
    assert (config.loop_cap, config.outer_loop_cap) == (4, 1)
    verdict = verify_pair(LONG, RIGHT, path=str(root / "train.py"), checks=AGF001, verifier=verifier)
    assert verdict.verdict == "accepted", verdict.reason
    assert "`for epoch` at train.py:41 capped at 1 iteration," in verdict.reason, verdict.reason
    assert "`for x, y` at train.py:43 at 4" in verdict.reason, verdict.reason


@pytest.mark.parametrize("value", ["'3'", "-1", "true", "2.5"])
def test_a_malformed_cap_is_a_configuration_error(tmp_path, value):
    root = _project(tmp_path, {"train.py": LONG})
    (root / "pyproject.toml").write_text(f"[tool.autograd-fix.verify]\nloop-cap = {value}\n")
    with pytest.raises(ConfigError, match="loop-cap"):
        load_config(str(root / "train.py"))


def test_a_shortened_run_that_is_still_too_slow_says_so(tmp_path, verifier):
    slow = "import time\nimport torch\nnet = torch.nn.Linear(2, 2)\nfor i in range(10**6):\n    net(torch.ones(2)).sum().backward()\ntime.sleep(60)\nout = net(torch.ones(2))\n"
    fixed = slow.replace("out = net(torch.ones(2))", "with torch.no_grad():\n    out = net(torch.ones(2))")
    root = _project(tmp_path, {"slow.py": slow})
    verdict = verify_pair(slow, fixed, path=str(root / "slow.py"), checks=AGF001, verifier=verifier, timeout=3)
    assert verdict.verdict == "unverified"
    assert "even shortened" in verdict.reason and "`for i` at slow.py:4 capped at 3" in verdict.reason, verdict.reason
    assert "loop-cap" in verdict.reason


def test_a_script_cannot_use_the_cap_to_get_out(tmp_path, verifier):
    """The loop helper is a builtin of the run child only: replacing it, or forging a
    report, changes nothing outside the child's sandbox."""
    outside = tmp_path / "outside.txt"
    hostile = textwrap.dedent(
        f"""\
        import builtins, torch
        real = builtins.__autograd_fix_loop__
        def loop(iterable, *rest):
            try:
                open({str(outside)!r}, "w").write("escaped")
            except OSError:
                pass
            return real(iterable, *rest)
        builtins.__autograd_fix_loop__ = loop
        net = torch.nn.Linear(2, 2)
        outs = []
        for i in range(100):
            outs.append(net(torch.ones(2)))
        """
    )
    fixed = hostile.replace("        outs.append(net(torch.ones(2)))", "        outs.append(net(torch.ones(2)).detach())")
    fixed = hostile.replace("for i in range(100):\n    outs.append(net(torch.ones(2)))", "with torch.no_grad():\n    for i in range(100):\n        outs.append(net(torch.ones(2)))")
    root = _project(tmp_path, {"hostile.py": hostile})
    verdict = verify_pair(hostile, fixed, path=str(root / "hostile.py"), checks=AGF001, verifier=verifier)
    assert not outside.exists()
    assert verdict.verdict in ("accepted", "unverified", "rejected")


LIB = """\
import torch
from torch import nn


def evaluate(model, batches):
    outputs = []
    for x in batches:
        outputs.append(model(x))
    return torch.cat(outputs).mean()


def fit(model, batches, epochs):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(epochs):
        for x in batches:
            optimizer.zero_grad()
            model(x).pow(2).mean().backward()
            optimizer.step()
        score = evaluate(model, batches)
    return score
"""

MAIN = """\
import torch
from trainlib import fit

batches = [torch.randn(4, 3) for _ in range(50)]
print("score", float(fit(torch.nn.Linear(3, 1), batches, epochs=5000)))
"""


def test_loops_of_the_project_files_a_driver_imports_are_capped(tmp_path, verifier):
    root = _project(tmp_path, {"trainlib.py": LIB, "main.py": MAIN})
    table = "[project]\nname = 'toy'\n[tool.autograd-fix.verify]\ndriver = \"python main.py\"\n"
    # the caps alone (no stop once the changed code ran): every capped loop of the library
    (root / "pyproject.toml").write_text(table + "stop-after-change = 0\n")
    fixed = LIB.replace("    for x in batches:\n        outputs.append(model(x))\n",
                        "    with torch.no_grad():\n        for x in batches:\n            outputs.append(model(x))\n")
    verdict = verify_pair(LIB, fixed, path=str(root / "trainlib.py"), checks=AGF001, verifier=verifier)
    assert verdict.verdict == "accepted", verdict.reason
    assert verdict.driver == "driver `python main.py`"
    assert "`for epoch` at trainlib.py:14 capped at 2 iterations" in verdict.reason, verdict.reason
    assert "`for x` at trainlib.py:15 at 3" in verdict.reason and "trainlib.py:7" not in verdict.reason
    assert "main.py:4" not in verdict.reason and "stopped" not in verdict.reason  # the data comprehension ran in full
    # by default the run also stops in the library, 2 steps after the evaluation ran
    (root / "pyproject.toml").write_text(table)
    verdict = verify_pair(LIB, fixed, path=str(root / "trainlib.py"), checks=AGF001, verifier=verifier)
    assert verdict.verdict == "accepted", verdict.reason
    assert "stopped 2 optimizer steps after the changed code ran (at loop `for x` at trainlib.py:15)" in verdict.reason, verdict.reason


def test_an_original_that_stops_at_its_error_reports_what_the_fixed_run_cut(tmp_path, verifier):
    """AGF010: the original's second backward fails before any loop reaches its cap."""
    script = textwrap.dedent(
        """\
        import torch
        from torch import nn
        rnn = nn.RNN(3, 4)
        optimizer = torch.optim.SGD(rnn.parameters(), lr=0.1)
        h = torch.zeros(1, 2, 4)
        for step in range(100000):
            out, h = rnn(torch.randn(5, 2, 3), h)
            optimizer.zero_grad()
            out.pow(2).mean().backward()
            optimizer.step()
        """
    )
    fixed = script.replace("            out, h = rnn(torch.randn(5, 2, 3), h)\n", "            out, h = rnn(torch.randn(5, 2, 3), h.detach())\n")
    fixed = script.replace("    out, h = rnn(torch.randn(5, 2, 3), h)\n", "    out, h = rnn(torch.randn(5, 2, 3), h.detach())\n")
    assert fixed != script
    root = _project(tmp_path, {"rnn.py": script})
    checks = tuple(rule_by_code("AGF010").contract.checks)
    verdict = verify_pair(script, fixed, path=str(root / "rnn.py"), checks=checks, verifier=verifier)
    assert verdict.verdict == "accepted", verdict.reason
    # the fixed run stops 2 steps after its changed line first ran (the original stopped at its error)
    assert "shortened (the rewritten run: stopped 2 optimizer steps after the changed code ran (at loop `for step` at rnn.py:6))" in verdict.reason, verdict.reason


def test_a_rewritten_that_runs_on_past_the_originals_error_is_not_rejected_for_its_time():
    """The original stopped at its autograd error after one batch; the fixed one trains
    its capped loops and meets the time limit: that says nothing against the fix."""
    from autograd_fix.verification.contracts import evaluate
    from autograd_fix.verification.protocol import ExceptionRecord, RunKind, RunRecord
    from autograd_fix.verification.sandbox import Outcome

    error = ExceptionRecord(type="RuntimeError", message="Trying to backward through the graph a second time", phase="run",
                            autograd=True, memory=False, where="line 9: loss.backward()")
    original = Outcome("ok", "finished", 2.0, "", 0, record=RunRecord(kind=RunKind.SCRIPT, exception=error))
    rewritten = Outcome("timeout", "did not finish within 20 s (killed)", 20.0, "", 0)
    result = evaluate("x", "script", "script", original, rewritten, ("original_error_gone",))
    assert result.verdict == "unverified", result.reason
    assert "the original stopped at its error after 2.0 s" in result.reason
    clean = Outcome("ok", "finished", 2.0, "", 0, record=RunRecord(kind=RunKind.SCRIPT))
    assert evaluate("x", "script", "script", clean, rewritten, ("outputs_equal",)).verdict == "rejected"


def test_forward_only_loops_are_capped_only_when_configured(tmp_path, verifier):
    root = _project(tmp_path, {"train.py": LONG})
    (root / "pyproject.toml").write_text("[project]\nname = 'toy'\n[tool.autograd-fix.verify]\nforward-loop-cap = 5\n")
    assert load_config(str(root / "train.py")).forward_loop_cap == 5
    verdict = verify_pair(LONG, RIGHT, path=str(root / "train.py"), checks=AGF001, verifier=verifier)
    assert verdict.verdict == "accepted", verdict.reason
    assert "`for x, y` at train.py:32 capped at 5 iterations" in verdict.reason, verdict.reason


def test_a_patch_that_changes_how_long_a_loop_trains_is_rejected(tmp_path, verifier):
    """Ten steps become four: both shortened runs make three, but the original's loop was
    cut and the rewritten's ended on its own."""
    script = "import torch\nnet = torch.nn.Linear(2, 1)\nopt = torch.optim.SGD(net.parameters(), lr=0.1)\n" \
             "for step in range(10):\n    opt.zero_grad()\n    net(torch.ones(2)).sum().backward()\n    opt.step()\n"
    fewer = script.replace("range(10)", "range(3)")
    root = _project(tmp_path, {"steps.py": script})
    verdict = verify_pair(script, fewer, path=str(root / "steps.py"), verifier=verifier)
    assert verdict.verdict == "rejected", verdict.reason
    assert "shortened differently" in verdict.reason


# A language model as yunjey/pytorch-tutorial writes it: the carried states detached at
# the start of each chunk (the line an AGF010 fix inserts), then 1,000 sampled words.
CHUNKS = """\
import torch
from torch import nn

model = nn.LSTM(4, 8)
head = nn.Linear(8, 4)
optimizer = torch.optim.Adam([*model.parameters(), *head.parameters()], lr=0.01)
trained = 0
for epoch in range(5):
    states = (torch.zeros(1, 2, 8), torch.zeros(1, 2, 8))
    for i in range(100):
        states = [s.detach() for s in states]
        out, states = model(torch.randn(3, 2, 4), states)
        loss = head(out).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        trained += 1
sampled = 0
with torch.no_grad():
    for _ in range(1000):
        model(torch.randn(1, 1, 4))
        sampled += 1
"""


def _stopping(source: str, hunks: list[list[int]]) -> tuple[dict, Bounds]:
    bounds = Bounds(cap=3, outer_cap=2, root="/nowhere", changed_file="/nowhere/prep.py",
                    changed_lines=[line for hunk in hunks for line in hunk], hunks=hunks, stop_after=DEFAULT_STOP_AFTER)
    namespace: dict = {"__name__": "__main__"}
    torch.manual_seed(0)
    with bounds:
        exec(bounds.compile(source, "/nowhere/prep.py"), namespace)
    assert bounds.stopped is not None
    return namespace, bounds


def test_a_run_stops_two_backwards_after_the_changed_code_ran():
    namespace, bounds = _stopping(CHUNKS, [[11]])
    # the changed line ran in the first chunk: that chunk's step and the next one's, then the
    # chunk loop and the epoch loop end; the sampling after them runs, capped at 3 forwards
    assert namespace["trained"] == DEFAULT_STOP_AFTER and namespace["sampled"] == 3
    # where, and how many items each loop under way had left (a shortened loop shows there)
    assert bounds.stopped == {"where": "prep.py:10", "label": "for i", "after": DEFAULT_STOP_AFTER, "counted": "optimizer step",
                              "left": [["for epoch", 4], ["for i", 98]]}
    # a line the run never reaches never stops it: the caps alone apply
    unreached = CHUNKS.replace("        trained += 1\n", "        trained += 1\n        if trained < 0:\n            print('never')\n")
    bounds = Bounds(cap=3, outer_cap=2, root="/nowhere", changed_file="/nowhere/prep.py", changed_lines=[19],
                    hunks=[[19]], stop_after=DEFAULT_STOP_AFTER)
    namespace = {"__name__": "__main__"}
    with bounds:
        exec(bounds.compile(unreached, "/nowhere/prep.py"), namespace)
    assert bounds.stopped is None and namespace["trained"] == 2 * 3 and namespace["sampled"] == 3


def test_a_changed_decorator_counts_when_its_function_runs_not_when_it_is_defined():
    source = textwrap.dedent(
        """\
        import torch
        from torch import nn

        model = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        @torch.no_grad()
        def evaluate():
            return model(torch.ones(2, 4)).sum()

        log = []
        for epoch in range(100):
            for step in range(100):
                optimizer.zero_grad()
                model(torch.randn(2, 4)).pow(2).sum().backward()
                optimizer.step()
                log.append("step")
            log.append(float(evaluate()))
        """
    )
    namespace, bounds = _stopping(source, [[7]])
    # epoch 1: 3 capped steps, the evaluation (the changed code), then 2 steps of epoch 2, whose
    # evaluation after the step loop still runs before the epoch loop ends
    assert namespace["log"][:3] == ["step"] * 3 and isinstance(namespace["log"][3], float)
    assert namespace["log"][4:6] == ["step"] * DEFAULT_STOP_AFTER and isinstance(namespace["log"][6], float)
    assert len(namespace["log"]) == 7
    assert bounds.stopped["label"] == "for step"


def test_the_stop_waits_for_the_step_of_an_accumulation_window():
    """Four micro-batches per optimizer step: the run never ends with gradients waiting."""
    source = textwrap.dedent(
        """\
        import torch
        from torch import nn

        model = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        steps = 0
        for i in range(1000):
            model(torch.randn(2, 4)).pow(2).sum().backward()
            if (i + 1) % 4 == 0:
                optimizer.step()
                optimizer.zero_grad()
                steps += 1
        """
    )
    bounds = Bounds(cap=1000, outer_cap=2, root="/nowhere", changed_file="/nowhere/prep.py", changed_lines=[8],
                    hunks=[[8]], stop_after=DEFAULT_STOP_AFTER)
    namespace: dict = {"__name__": "__main__"}
    with bounds:
        exec(bounds.compile(source, "/nowhere/prep.py"), namespace)
    assert namespace["steps"] == DEFAULT_STOP_AFTER and namespace["i"] == 4 * DEFAULT_STOP_AFTER - 1  # two whole windows


def test_a_run_killed_before_its_first_iteration_says_how_far_it_got():
    """A baby GPT on one CPU thread (nanoGPT's shakespeare_char config): one forward alone
    takes longer than the limit. The verdict says how far the run got, and a second try
    with every evaluation capped is not made when the run had not got past as many
    forwards as a capped evaluation keeps."""
    from autograd_fix.verification.bounded import PROGRESS, capping_evaluations_could_help, note_timeouts
    from autograd_fix.verification.sandbox import Outcome

    settings = {"cap": 3, "outer_cap": 2, "forward_cap": None, "stop_after": 2}
    none = Outcome("timeout", "did not finish within 20 s (killed)", 20.0, "number of parameters: 10.65M\n", 0)
    two = Outcome("timeout", "did not finish within 20 s (killed)", 20.0,
                  f"{PROGRESS}{{\"forwards\": 1, \"backwards\": 0, \"seconds\": 9.5}}\nstep 0\n"
                  f"{PROGRESS}{{\"forwards\": 2, \"backwards\": 0, \"seconds\": 18.9}}\n", 0)
    many = f"{PROGRESS}{{\"forwards\": 8, \"backwards\": 0, \"seconds\": 3.0}}\n"
    assert not capping_evaluations_could_help(none.output) and not capping_evaluations_could_help(two.output)
    assert capping_evaluations_could_help(many)
    note_timeouts([none, two], settings)
    assert "not one forward of a model with parameters had finished by then" in none.detail, none.detail
    assert "by then at least 2 forwards, no backward had finished (the last counted after 18.9 s)" in two.detail, two.detail
    assert two.output == "step 0\n" and PROGRESS not in two.output  # the markers are the tool's, not the script's


def test_hand_written_updates_stop_after_two_backwards():
    """pytorch/examples word_language_model updates by hand (no optimizer, no step)."""
    source = textwrap.dedent(
        """\
        import torch
        from torch import nn

        model = nn.Linear(4, 1)
        updates = 0
        for i in range(1000):
            model.zero_grad()
            model(torch.randn(2, 4)).pow(2).sum().backward()
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-0.1)
            updates += 1
        """
    )
    namespace, bounds = _stopping(source, [[7]])
    assert namespace["updates"] == DEFAULT_STOP_AFTER and bounds.stopped["counted"] == "backward"
    assert bounds.stopped["label"] == "for i"  # not the parameter loop inside the iteration


STEP_FN = """\
import torch
from torch import nn

model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def train_step(x):
    loss = model(x).pow(2).mean()
    loss.backward()
    optimizer.step()


def evaluate():
    return model(torch.ones(2, 4)).sum()


for epoch in range(100):
    for i in range(100):
        train_step(torch.randn(2, 4))
    score = evaluate()
"""


def test_a_line_added_at_the_end_of_a_body_stops_both_sides_alike(tmp_path, verifier):
    """AGF002's second candidate adds `zero_grad()` after the last statement of a body.
    Anchored on the next executable line, the original side would wait for `evaluate()`
    and the two sides would stop at different steps; both wait for `optimizer.step()`."""
    from autograd_fix.verification.coverage import reach_points

    fixed = STEP_FN.replace("    optimizer.step()\n", "    optimizer.step()\n    optimizer.zero_grad()\n")
    assert reach_points(STEP_FN, fixed) == ([[11]], [[11]], [0], [])  # the original only anchors the insertion
    decorated = STEP_FN.replace("def evaluate", "@torch.no_grad()\ndef evaluate")
    assert reach_points(STEP_FN, decorated)[:2] == ([[14]], [[15]])  # the def: its body, when called
    root = _project(tmp_path, {"steps.py": STEP_FN})
    verdict = verify_pair(STEP_FN, fixed, path=str(root / "steps.py"), rule="AGF002",
                          checks=tuple(rule_by_code("AGF002").contract.checks), verifier=verifier)
    assert verdict.verdict == "accepted", verdict.reason
    assert "stopped 2 optimizer steps after the changed code ran (at loop `for i` at steps.py:19)" in verdict.reason, verdict.reason


# An evaluation given `no_grad` (AGF001) runs at the start of every epoch, before any
# training step: a run whose contract is decided by what the call returned ends there.
EVAL_FIRST = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.2), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = [(torch.randn(4, 8), torch.randn(4, 1)) for _ in range(10)]
log = []


@torch.no_grad()
def evaluate():
    model.eval()
    total = 0.0
    for x, y in data:
        loss = nn.functional.mse_loss(model(x), y)
        total += loss.item()
    model.train()
    return total / len(data)


for epoch in range(100):
    log.append(evaluate())
    for x, y in data:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        log.append("step")
"""
EVAL_BUGGY = EVAL_FIRST.replace("@torch.no_grad()\n", "")


def _stopping_at_return(source: str, hunks: list[list[int]]) -> tuple[dict, Bounds]:
    from autograd_fix.verification.bounded import StopRun

    bounds = Bounds(cap=3, outer_cap=2, root="/nowhere", changed_file="/nowhere/prep.py",
                    changed_lines=[line for hunk in hunks for line in hunk], hunks=hunks, stop_after=DEFAULT_STOP_AFTER,
                    stop_at_return=True)
    namespace: dict = {"__name__": "__main__"}
    torch.manual_seed(0)
    with bounds:
        try:
            exec(bounds.compile(source, "/nowhere/prep.py"), namespace)
        except StopRun:
            pass
    return namespace, bounds


def test_a_run_stops_when_the_changed_evaluation_returns():
    namespace, bounds = _stopping_at_return(EVAL_FIRST, [[12]])
    # the evaluation (3 batches, capped) ran and returned; not one training step followed
    assert len(namespace["log"]) == 0 and bounds.steps == 0 and bounds.forwards == 3
    assert bounds.stopped is not None and bounds.stopped["at_return"] and not bounds.stopped["escaped"]
    assert bounds.stopped["label"] == "evaluate()" and bounds.stopped["where"] == "prep.py:11"
    observed = bounds.observed()
    returned = observed["evaluate() returned (the changed function, where the run stopped)"]
    assert isinstance(returned, float) and returned > 0
    # what code after the stop would read: the random state, which modules train
    assert observed["modules in training mode where the run stopped"] == {"model": [".", "0", "1", "2"]}
    assert isinstance(observed["torch random state where the run stopped"], torch.Tensor)
    # read once the function's own `@torch.no_grad()` has exited: a rewrite that leaves grad
    # mode off for good differs here, the right decorator does not
    assert observed["autograd mode where the run stopped"] == {"grad enabled": True, "inference mode": False}


def test_a_graph_that_outlives_the_changed_call_is_recorded_as_escaped():
    """A loss with its graph returned to a caller that backpropagates it: the stop at the
    return proves too little (a wrong `no_grad` there shows only at the backward), so the
    run says so and the job runs the pair again with the ordinary stop."""
    source = EVAL_BUGGY.replace("    return total / len(data)\n", "    return loss\n")
    namespace, bounds = _stopping_at_return(source, [[11]])
    assert bounds.stopped["escaped"] == "it returned a tensor that holds a graph", bounds.stopped
    # the ordinary stop's evidence: without the stop at the return the run trains on
    from autograd_fix.verification.bounded import escaped_stop
    from autograd_fix.verification.protocol import BoundedRecord
    from autograd_fix.verification.sandbox import Outcome

    class _Record:
        bounded = BoundedRecord(cap=3, outer_cap=2, stopped=bounds.stopped)

    outcome = Outcome("ok", "", 1.0, "", 0)
    outcome.record = _Record()
    assert escaped_stop([outcome])


def test_a_changed_call_that_trains_does_not_stop_at_its_return():
    source = textwrap.dedent(
        """\
        import torch
        from torch import nn

        model = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        steps = []

        def train_step():
            optimizer.zero_grad()
            model(torch.randn(2, 4)).pow(2).sum().backward()
            optimizer.step()
            steps.append(1)

        for i in range(100):
            train_step()
        """
    )
    namespace, bounds = _stopping_at_return(source, [[9]])
    # the ordinary stop: 2 optimizer steps after the changed line ran (its own step counts)
    assert bounds.stopped is not None and not bounds.stopped.get("at_return")
    assert len(namespace["steps"]) == DEFAULT_STOP_AFTER


def test_two_hunks_that_share_a_reach_point_both_count():
    """A decorator added and the line after the `def` deleted: both hunks are placed on the
    same statement; the run counts both, so it stops (before, it never did)."""
    namespace, bounds = _stopping_at_return(EVAL_FIRST, [[12], [12]])
    assert bounds.stopped is not None and bounds.stopped["at_return"]


def test_the_changed_evaluation_is_verified_at_its_return(tmp_path, verifier):
    """Right fix accepted, a wrong one that leaves the model in eval mode (equal returned
    value, training after it would differ) rejected, both without a training step; a wrong
    `no_grad` around the loss a caller backpropagates rejected by the ordinary stop."""
    root = _project(tmp_path, {"train.py": EVAL_BUGGY})
    path = str(root / "train.py")
    right = verify_pair(EVAL_BUGGY, EVAL_FIRST, path=path, rule="AGF001", checks=AGF001, verifier=verifier)
    assert right.verdict == "accepted", right.reason
    assert "stopped when the changed evaluate() returned (train.py:11)" in right.reason, right.reason
    lost_train = EVAL_FIRST.replace("    model.train()\n    return", "    return")
    wrong = verify_pair(EVAL_BUGGY, lost_train, path=path, rule="AGF001", checks=AGF001, verifier=verifier)
    assert wrong.verdict == "rejected", wrong.reason
    assert "modules in training mode where the run stopped" in wrong.reason, wrong.reason
    step = EVAL_BUGGY.replace("        loss = nn.functional.mse_loss(model(x), y)\n        loss.backward()",
                              "        loss = compute(x, y)\n        loss.backward()")
    step = step.replace("for epoch in", "def compute(x, y):\n    return nn.functional.mse_loss(model(x), y)\n\n\nfor epoch in")
    no_grad_step = step.replace("def compute", "@torch.no_grad()\ndef compute")
    wrong = verify_pair(step, no_grad_step, path=path, rule="AGF001", checks=AGF001, verifier=verifier)
    assert wrong.verdict == "rejected", wrong.reason
    assert "does not require grad" in wrong.reason, wrong.reason


def test_a_run_out_of_its_limits_after_a_forward_is_tried_with_the_shortest_evaluation():
    from autograd_fix.verification.bounded import PROGRESS, shortest_evaluation_could_help
    from autograd_fix.verification.sandbox import Outcome

    none = Outcome("timeout", "did not finish within 20 s (killed)", 20.0, "number of parameters: 10.65M\n", 0)
    one = Outcome("timeout", "did not finish within 20 s (killed)", 20.0,
                  f"{PROGRESS}{{\"forwards\": 1, \"backwards\": 0, \"seconds\": 9.5}}\n", 0)
    memory = Outcome("memory", "ran out of memory under the 4096 MB limit", 12.0,
                     f"{PROGRESS}{{\"forwards\": 1, \"backwards\": 0, \"seconds\": 9.5}}\n", 0)
    fine = Outcome("ok", "", 3.0, f"{PROGRESS}{{\"forwards\": 4, \"backwards\": 0, \"seconds\": 2.0}}\n", 0)
    assert not shortest_evaluation_could_help([none, fine])
    assert shortest_evaluation_could_help([one, fine]) and shortest_evaluation_could_help([memory, fine])
    assert not shortest_evaluation_could_help([fine, one])  # only the original's limits count


def test_what_the_changed_call_filled_in_is_compared_at_its_return():
    """An evaluation that fills a dict its caller passed in, and returns a meter of the
    project's own class: both are read by the caller after the stop, so both are outputs."""
    source = textwrap.dedent(
        """\
        import torch
        from torch import nn


        class Meter:
            def __init__(self):
                self.sum, self._count = 0.0, 0


        model = nn.Linear(4, 1)


        @torch.no_grad()
        def evaluate(results, loader):
            meter = Meter()
            for x in loader:
                meter.sum += float(model(x).sum())
                meter._count += 1
            results["last"] = meter.sum
            return meter


        def main():
            results = {}
            meter = evaluate(results, [torch.ones(2, 4)] * 5)
            print(results, meter.sum / meter._count)


        main()
        """
    )
    namespace, bounds = _stopping_at_return(source, [[14]])
    assert bounds.stopped is not None and bounds.stopped["at_return"]
    observed = bounds.observed()
    meter = observed["evaluate() returned (the changed function, where the run stopped)"]
    assert meter["__class__"] == "Meter" and meter["_count"] == 3  # the evaluation loop keeps 3 batches
    results = observed["evaluate() argument results after the call (where the run stopped)"]
    assert results == {"last": meter["sum"]}
    assert "evaluate() argument loader after the call (where the run stopped)" in observed  # a plain list, kept
