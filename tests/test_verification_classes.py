"""Issue 17, item 6: the failure classes of hand-fixed real bugs, each fixed as a class.

Each test is a patch pair shaped like the real code the class was found in, judged under
its rule's own contract on one warm worker (module fixture). Every one of them came
back wrong before its fix (accepted where it must be rejected, or the other way round,
or unverified); see the docstrings.
"""

from __future__ import annotations

import io

import pytest
import torch

from autograd_fix.codemods.registry import rule_by_code
from autograd_fix.verification import verify_pair
from autograd_fix.verification.record import plain, serialize


def judge(verifier, original: str, rewritten: str, rule: str, **kw):
    checks = tuple(rule_by_code(rule).contract.checks)
    return verify_pair(original, rewritten, checks=checks, rule=rule, verifier=verifier, timeout=30, **kw)


# -- class 1: a dropped term hides where its parameter is zero ------------------------------
TIME_RNN = 'import torch\nfrom torch import nn\n\n\nclass TimeRNN(nn.Module):\n    def __init__(self, n_in=3, hidden=8, steps=5):\n        super().__init__()\n        self.inp = nn.Linear(n_in, hidden)\n        self.rec = nn.Linear(hidden, hidden)\n        self.time_bias = nn.Parameter(torch.zeros(steps, hidden))\n        self.head = nn.Linear(hidden, 1)\n\n    def forward(self, x):\n        h = torch.zeros(x.shape[0], self.rec.out_features)\n        for t in range(x.shape[1]):\n            h = torch.tanh(self.inp(x[:, t]) + self.rec(h))\n            h += self.time_bias[t]\n        return self.head(h)\n\n\ndef main():\n    torch.manual_seed(0)\n    model = TimeRNN()\n    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)\n    x, y = torch.randn(16, 5, 3), torch.randn(16, 1)\n    for epoch in range(3):\n        optimizer.zero_grad()\n        loss = nn.functional.mse_loss(model(x), y)\n        loss.backward()\n        optimizer.step()\n        print(f"epoch {epoch}: loss {loss.item():.4f}")\n\n\nif __name__ == "__main__":\n    main()\n'


def test_a_term_dropped_where_its_parameter_is_zero_is_seen_at_a_second_point(verifier):
    """`h += self.time_bias[t]` (in place on tanh's saved output) rewritten to
    `h + 0 * self.time_bias[t]`: equal forward values while `time_bias` is zeros, and the
    rewritten's own gradients match finite differences, so one comparison point accepted
    it. At a second point (parameters, inputs and seeds moved) the term is not zero."""
    fixed = TIME_RNN.replace("h += self.time_bias[t]", "h = h + self.time_bias[t]")
    wrong = TIME_RNN.replace("h += self.time_bias[t]", "h = h + 0 * self.time_bias[t]")
    right = judge(verifier, TIME_RNN, fixed, "AGF003")
    assert right.verdict == "accepted", right.reason
    assert "at a second point too" in right.reason
    dropped = judge(verifier, TIME_RNN, wrong, "AGF003")
    assert dropped.verdict == "rejected", dropped.reason
    assert "second point" in dropped.reason


# -- class 2: finite differences on tensors the script makes itself ---------------------------
MASKED_CLASSIFIER = 'import numpy as np\nimport torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n\nclass Classifier(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc1 = nn.Linear(6, 16)\n        self.fc2 = nn.Linear(16, 1)\n\n    def forward(self, x, keep):\n        h = torch.tanh(self.fc1(x))\n        h.data.mul_(keep)\n        return torch.sigmoid(self.fc2(h)).squeeze(1)\n\n\ndef main():\n    torch.manual_seed(0)\n    rng = np.random.default_rng(0)\n    features = torch.from_numpy(rng.normal(size=(32, 6)).astype(np.float32))\n    labels = torch.from_numpy((rng.random(32) > 0.5).astype(np.float32))\n    model = Classifier()\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n    for epoch in range(3):\n        keep = (torch.rand(32, 16) > 0.3).float() / 0.7\n        loss = F.binary_cross_entropy(model(features, keep), labels)\n        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n        print(f"epoch {epoch}: loss {loss.item():.4f}")\n\n\nif __name__ == "__main__":\n    main()\n'


def test_finite_differences_run_in_float64_over_tensors_the_script_made_float32(verifier):
    """A `.data` mask on tanh's saved output makes the gradients silently wrong; the fix
    `h = h * keep` corrects them. The script's features come from a float32 numpy array
    and its mask from `.float()`: with float64 only as the default dtype the re-runs
    raised "mat1 and mat2 must have the same dtype", and the right fix was rejected
    ("no correction can be shown"). Now the re-runs are float64 at every operation."""
    fixed = MASKED_CLASSIFIER.replace("h.data.mul_(keep)", "h = h * keep")
    verdict = judge(verifier, MASKED_CLASSIFIER, fixed, "AGF009")
    assert verdict.verdict == "accepted", verdict.reason
    assert "gradients corrected" in verdict.reason


def test_float64_mode_widens_what_the_code_asks_for_and_keeps_aliases():
    import numpy as np

    from autograd_fix.verification.float64 import Float64Mode

    base = torch.zeros(3, dtype=torch.float32)
    with Float64Mode():
        made = torch.randint(0, 2, (3,)).float()
        asked = torch.ones(2, dtype=torch.float32)
        from_data = torch.tensor([0.5, 1.5], dtype=torch.float32)
        mixed = torch.from_numpy(np.ones(3, dtype=np.float32)) * torch.ones(3, dtype=torch.float64)
        view = base.data
        view.add_(1)  # writes through to `base`, as the code meant
    assert {made.dtype, asked.dtype, from_data.dtype, mixed.dtype} == {torch.float64}
    assert base.dtype == torch.float32 and base.tolist() == [1.0, 1.0, 1.0]


# -- class 3: a record that holds a numpy scalar ------------------------------------------------
NUMPY_EPOCH = 'import numpy as np\nimport torch\nimport torch.nn.functional as F\n\n\ndef train_epoch(model, loader, optimizer):\n    model.train()\n    losses = []\n    total = 0\n    for inputs, targets in loader:\n        optimizer.zero_grad()\n        loss = F.cross_entropy(model(inputs), targets)\n        loss.backward()\n        optimizer.step()\n        losses.append(loss.item())\n        total += loss\n    return np.mean(losses), total\n'


def test_a_train_function_returning_a_numpy_scalar_is_verified(verifier):
    """`return np.mean(losses), total`: a `numpy.float64` in the record made it unreadable
    under the weights-only unpickler ("Weights only load failed"), so the AGF006 fix was
    unverified. The record now carries the plain float."""
    fixed = NUMPY_EPOCH.replace("total += loss\n", "total += loss.item()\n")
    verdict = judge(verifier, NUMPY_EPOCH, fixed, "AGF006")
    assert verdict.verdict == "accepted", verdict.reason


def test_records_carry_numpy_namedtuples_and_dataclasses_as_plain_values():
    import collections
    import dataclasses
    import enum

    import numpy as np

    Result = collections.namedtuple("Result", "loss accuracy")

    @dataclasses.dataclass
    class Metrics:
        loss: torch.Tensor
        steps: int

    class Phase(enum.Enum):
        TRAIN = 1

    value = {
        "mean": np.mean([0.5, 1.5]), "flag": np.bool_(True), "count": np.int64(3), "name": np.str_("val"),
        "array": np.arange(3, dtype=np.float32), "result": Result(np.float32(0.25), 0.9),
        "metrics": Metrics(torch.ones(2, requires_grad=True) * 2, 4), "phase": Phase.TRAIN,
    }
    record = plain({"outputs": {k: serialize(v) for k, v in value.items()}, "odd": np.float64(2.0)})
    buffer = io.BytesIO()
    torch.save(record, buffer)
    buffer.seek(0)
    back = torch.load(buffer, weights_only=True)
    outputs = back["outputs"]
    assert outputs["mean"] == 1.0 and type(outputs["mean"]) is float and back["odd"] == 2.0
    assert outputs["flag"] is True and outputs["count"] == 3 and outputs["name"] == "val"
    assert torch.equal(outputs["array"], torch.arange(3, dtype=torch.float32))
    assert outputs["result"]["__seq__"] == "Result" and outputs["result"]["items"][0] == 0.25
    metrics = outputs["metrics"]
    assert metrics["__object__"] == "Metrics" and torch.equal(metrics["attrs"]["loss"], torch.full((2,), 2.0))
    assert metrics["attrs"]["steps"] == 4 and outputs["phase"] == {"__object__": "Phase.TRAIN"}


# -- class 5 (issue 17's sixth): an AGF001 fix that removes no graph ----------------------------
INFERENCE_DECORATED = 'import functools\n\nimport torch\nfrom torch import nn\n\n\ndef inference(fn):\n    @functools.wraps(fn)\n    def wrapper(*args, **kwargs):\n        with torch.inference_mode():\n            return fn(*args, **kwargs)\n\n    return wrapper\n\n\nclass Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))\n\n    def forward(self, x):\n        return self.body(x)\n\n\n@inference\ndef predict(model, batches):\n    model.eval()\n    scores = []\n    for x in batches:\n        scores.append(model(x).softmax(-1))\n    return torch.cat(scores)\n\n\nif __name__ == "__main__":\n    torch.manual_seed(0)\n    net = Net()\n    probs = predict(net, [torch.randn(16, 8) for _ in range(4)])\n    print(probs.argmax(-1).tolist())\n'


def test_a_no_grad_fix_under_a_project_inference_decorator_is_not_confirmed(verifier):
    """`predict` already runs under a project decorator that enters inference mode:
    wrapping its loop in `no_grad` removes no graph ("graph held at peak 0 B -> 0 B"),
    which was accepted. The finding is not confirmed, and its fix is not accepted."""
    fixed = INFERENCE_DECORATED.replace(
        "    for x in batches:\n        scores.append(model(x).softmax(-1))\n",
        "    with torch.no_grad():\n        for x in batches:\n            scores.append(model(x).softmax(-1))\n",
    )
    assert fixed != INFERENCE_DECORATED
    verdict = judge(verifier, INFERENCE_DECORATED, fixed, "AGF001")
    assert verdict.verdict == "rejected", verdict.reason
    assert verdict.reason.split(": ", 1)[1].startswith("not confirmed")


# -- class 4: observables of graph state compared as outputs -------------------------------------
TAGGER_EVAL = 'import torch\nimport torch.nn.functional as F\nfrom torch import nn\n\n\nclass Tagger(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.embed = nn.Embedding(50, 16)\n        self.out = nn.Linear(16, 5)\n\n    def forward(self, tokens):\n        return self.out(self.embed(tokens).mean(1))\n\n\ndef evaluate(model, batches):\n    model.eval()\n    total, correct, tracked = 0.0, 0, []\n    for tokens, tags in batches:\n        logits = model(tokens)\n        total += F.cross_entropy(logits, tags).item()\n        correct += (logits.argmax(-1) == tags).sum().item()\n        tracked.append(logits.requires_grad)\n    print(logits.grad_fn is None)\n    return {"loss": total / len(batches), "correct": correct, "graph": tracked}\n\n\nif __name__ == "__main__":\n    torch.manual_seed(0)\n    model = Tagger()\n    batches = [(torch.randint(0, 50, (8, 6)), torch.randint(0, 5, (8,))) for _ in range(4)]\n    stats = evaluate(model, batches)\n    print(f"val loss {stats[\'loss\']:.4f} correct {stats[\'correct\']}")\n'
_LOOP = """    for tokens, tags in batches:
        logits = model(tokens)
        total += F.cross_entropy(logits, tags).item()
        correct += (logits.argmax(-1) == tags).sum().item()
        tracked.append(logits.requires_grad)
"""


def _no_grad_loop(source: str) -> str:
    indented = "".join("    " + line + "\n" for line in _LOOP.splitlines())
    return source.replace(_LOOP, "    with torch.no_grad():\n" + indented)


def test_observables_of_graph_state_may_change_where_the_contract_says_so(verifier):
    """The evaluation keeps `logits.requires_grad` per batch and prints `logits.grad_fn is
    None`: the `no_grad` fix changes both by design, and was rejected ("outputs differ:
    stats.graph[0]: True != False"). AGF001's contract expects graph state to change: the
    verdict lists them, and a real difference next to them (the loss) still counts."""
    fixed = _no_grad_loop(TAGGER_EVAL)
    assert fixed != TAGGER_EVAL
    verdict = judge(verifier, TAGGER_EVAL, fixed, "AGF001")
    assert verdict.verdict == "accepted", verdict.reason
    # the run ends when `evaluate` returns (AGF001's contract is decided by then): what it
    # returned, later assigned to `stats`, is named by the function
    returned = "evaluate() returned (the changed function, where the run stopped)"
    assert "observables of graph state changed" in verdict.reason, verdict.reason
    assert f"{returned}.graph[0]: True -> False" in verdict.reason, verdict.reason
    wrong = judge(verifier, TAGGER_EVAL, fixed.replace("total / len(batches)", "total"), "AGF001")
    assert wrong.verdict == "rejected", wrong.reason
    assert f"{returned}.loss" in wrong.reason, wrong.reason


def test_graph_state_reads_reach_names_containers_and_callers():
    from autograd_fix.verification.graph_state import graph_state

    found = graph_state(TAGGER_EVAL)
    assert {"tracked", "evaluate", "stats", "return"} <= found.names
    assert "total" not in found.names and "correct" not in found.names
    print_line = TAGGER_EVAL.splitlines().index("    print(logits.grad_fn is None)") + 1
    assert print_line in found.lines
