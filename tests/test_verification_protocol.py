"""The typed protocol between the tool and its verification worker (`verification.protocol`):
versioned frozen records with explicit JSON conversion, statuses as enums, and a
mismatch that ends as a clear `unverified` verdict rather than a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from autograd_fix.verification import UNVERIFIED, verify_pair
from autograd_fix.verification import protocol
from autograd_fix.verification.protocol import (
    PROTOCOL_VERSION, Bounds, GradcheckRequest, Op, ProtocolError, RunStatus, SideSpec, VerifyRequest,
)
from autograd_fix.verification.sandbox import Outcome

TRAIN = textwrap.dedent(
    """\
    import torch

    w = torch.ones(3, requires_grad=True)
    loss = (w * 2).sum()
    loss.backward()
    print(loss.item())
    """
)

REQUEST = VerifyRequest(
    path="/project/train.py",
    relative="train.py",
    user_root="/project",
    argv=("--epochs", "1"),
    bounds=Bounds(cap=3, outer_cap=2, forward_cap=None),
    rule="AGF003",
    checks=("original_error_gone", "forward_values_equal"),
    units=({"kind": "script", "original": "a = 1\n", "rewritten": "a = 2\n", "fallbacks": []},),
    timeout=12.5,
    factories={"model": "pkg.testing:make_model"},
    roles={"names": {"loader": ["feed"]}, "objects": {}},
    pass_env={"WANDB_MODE": "offline"},
)


def _wire(record: object) -> dict:
    """Through JSON text, as the worker's stdin carries it."""
    return json.loads(json.dumps(record.to_json()))  # type: ignore[attr-defined]


def test_requests_and_side_specs_round_trip_through_json() -> None:
    assert VerifyRequest.from_json(_wire(REQUEST)) == REQUEST
    gradcheck = GradcheckRequest(source="import torch\n", path="/p/f.py", timeout=3.0)
    assert GradcheckRequest.from_json(_wire(gradcheck)) == gradcheck
    spec = SideSpec(kind="script", side="rewritten", source="x = 1\n", argv=("-q",), bounds=Bounds(cap=2),
                    changed_lines=[[3, 4]], observe=("total_loss",), counterpart="x = 0\n")
    assert SideSpec.from_json(_wire(spec)) == spec
    data = _wire(REQUEST)
    assert data["protocol"] == PROTOCOL_VERSION and data["op"] == "verify" and data["bounds"]["cap"] == 3


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"protocol": PROTOCOL_VERSION + 1}, f"protocol version {PROTOCOL_VERSION + 1}, this side speaks {PROTOCOL_VERSION}"),
        ({"protocol": None}, "no protocol version"),
        ({"memory_limit": 10}, "unknown field(s) memory_limit"),
        ({"bounds": {"cap": 3, "outer_cap": 2, "forward_cap": None, "inner_cap": 1}}, "verify request.bounds: unknown field(s) inner_cap"),
        ({"op": "train"}, "verify request.op: 'train' is not one of"),
    ],
)
def test_a_request_of_another_version_or_shape_is_refused_with_what_is_wrong(change: dict, said: str) -> None:
    data = {**_wire(REQUEST), **change}
    if data["protocol"] is None:
        del data["protocol"]
    with pytest.raises(ProtocolError) as error:
        VerifyRequest.from_json(data)
    assert said in str(error.value)


def test_a_missing_field_is_named() -> None:
    data = _wire(REQUEST)
    del data["timeout"], data["argv"]
    with pytest.raises(ProtocolError, match=r"missing field\(s\) argv, timeout"):
        VerifyRequest.from_json(data)


def test_statuses_are_enums_that_read_as_their_values() -> None:
    outcome = Outcome("timeout", "did not finish", 1.0, "", 0)
    assert outcome.status is RunStatus.TIMEOUT and outcome.status == "timeout" and f"{outcome.status}" == "timeout"
    assert Op("verify") is Op.VERIFY and json.dumps({"op": Op.VERIFY}) == '{"op": "verify"}'
    with pytest.raises(ValueError):
        Outcome("finished-ish", "", 0.0, "", 0)


def test_a_version_mismatch_is_an_unverified_verdict_not_a_traceback(verifier, monkeypatch: pytest.MonkeyPatch) -> None:
    # the tool now stamps another version than the running worker speaks
    monkeypatch.setattr(protocol, "PROTOCOL_VERSION", PROTOCOL_VERSION + 1)
    verdict = verify_pair(TRAIN, TRAIN.replace("(w * 2)", "(w * 2.0)"), verifier=verifier)
    assert verdict.verdict == UNVERIFIED
    assert f"protocol version {PROTOCOL_VERSION + 1}, this side speaks {PROTOCOL_VERSION}" in verdict.reason
    assert "Traceback" not in verdict.reason
    monkeypatch.undo()
    # the worker keeps serving requests of its own version
    assert verify_pair(TRAIN, TRAIN.replace("(w * 2)", "(w * 2.0)"), verifier=verifier).verdict == "accepted"
    assert verifier.run_many([{"op": "ping", "protocol": 0}])[0]["ok"] is False
    assert verifier.ping()


def test_the_protocol_and_the_worker_module_load_without_torch_or_libcst() -> None:
    code = ("import sys; import autograd_fix.verification.protocol, autograd_fix.verification.worker; "
            "print(sorted(m for m in ('torch', 'libcst', 'rich', 'typer') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"
