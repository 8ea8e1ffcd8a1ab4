"""The run record (`protocol.RunRecord`): what a run child saves and the job judges is a
frozen, versioned dataclass; it travels as plain data read back without running code
(``weights_only``), once, into the dataclass, and a record of another version or shape
ends as an ``unverified`` verdict that says why."""

from __future__ import annotations

import collections
import dataclasses
import io

import numpy as np
import pytest
import torch

from autograd_fix.verification.contracts import evaluate
from autograd_fix.verification.harness import saved
from autograd_fix.verification.protocol import (
    PROTOCOL_VERSION, VERSION_KEY, BoundedRecord, CoverageRecord, ExceptionRecord, GraphStateRecord, ProtocolError, RunKind,
    RunRecord, RunRecordDraft, Unbound, read_record,
)
from autograd_fix.verification.record import serialize
from autograd_fix.verification.sandbox import Outcome
from autograd_fix.verification.worker import _checked

Result = collections.namedtuple("Result", "loss accuracy")


@dataclasses.dataclass
class Metrics:
    loss: torch.Tensor
    steps: int


def _script_record() -> RunRecord:
    """A record as a script run that stopped at autograd's error leaves it: values a
    training script returns (a numpy mean, a namedtuple, a dataclass of tensors), its
    typed parts filled."""
    draft = RunRecordDraft("script")
    draft.exception = {"type": "RuntimeError", "message": "Trying to backward through the graph a second time",
                       "phase": "run", "autograd": True, "memory": False, "where": "line 9: loss.backward()",
                       "environment": None, "frames": [("/copy/train.py", 9, "loss.backward()")], "user_line": 9, "top_line": 12}
    draft.outputs = {name: serialize(value) for name, value in {
        "mean": np.mean([0.5, 1.5]), "result": Result(np.float32(0.25), 0.9),
        "metrics": Metrics(torch.ones(2, requires_grad=True) * 2, np.int64(4)),
    }.items()}
    draft.graph_state = GraphStateRecord(names=("h",), lines=(7,))
    draft.changed_lines = CoverageRecord(hunks=[[8, 9]], ran=[8, 9], missed=[])
    draft.bounded = BoundedRecord(cap=3, outer_cap=2, loops=({"where": "train.py:6", "label": "for step", "cap": 3,
                                                               "capped": 1, "entries": 1, "forward": False},))
    draft.measures = {"peak_bytes": np.int64(4096), "optimizer_steps": 3}
    draft.leaf_grads = {"w": torch.full((3,), 2.0)}
    draft.reached = ("train",)
    draft.forward_count = 2
    return draft.freeze()


def _through_file(record: RunRecord) -> RunRecord:
    """What the job reads of `record`: saved as the child saves it, loaded weights-only."""
    buffer = io.BytesIO()
    torch.save(saved(record), buffer)
    buffer.seek(0)
    return read_record(torch.load(buffer, weights_only=True))


def test_a_record_round_trips_through_the_weights_only_file_as_the_same_typed_record() -> None:
    record = _script_record()
    back = _through_file(record)
    assert back.kind is RunKind.SCRIPT and back.kind == "script"
    # the frames only served `Place.user_view` in the child: they never leave it
    assert back.exception == ExceptionRecord(type="RuntimeError", message="Trying to backward through the graph a second time",
                                             phase="run", autograd=True, where="line 9: loss.backward()", user_line=9, top_line=12)
    assert back.graph_state == record.graph_state and back.changed_lines == record.changed_lines
    assert back.bounded == record.bounded and back.reached == ("train",) and back.forward_count == 2
    outputs = back.outputs
    assert outputs["mean"] == 1.0 and type(outputs["mean"]) is float
    assert outputs["result"]["__seq__"] == "Result" and outputs["result"]["items"][0] == 0.25
    assert outputs["metrics"]["__object__"] == "Metrics" and torch.equal(outputs["metrics"]["attrs"]["loss"], torch.full((2,), 2.0))
    assert outputs["metrics"]["attrs"]["steps"] == 4 and back.measures["peak_bytes"] == 4096
    assert torch.equal(back.leaf_grads["w"], torch.full((3,), 2.0))
    # fields the run did not set keep their defaults
    assert back.unbound is None and back.printed is None and back.steps == [] and back.zero_dim_readings == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        back.exception = None  # type: ignore[misc]


def test_the_saved_form_is_plain_data_only() -> None:
    plain_types = (dict, list, tuple, str, int, float, bool, type(None), torch.Tensor)

    def walk(value: object) -> None:
        assert isinstance(value, plain_types), type(value)
        if isinstance(value, dict):
            for key, item in value.items():
                walk(key)
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    data = saved(_script_record())
    walk(data)
    assert data[VERSION_KEY] == PROTOCOL_VERSION and data["kind"] == "script" and type(data["kind"]) is str


def test_a_draft_refuses_a_field_that_is_not_one() -> None:
    draft = RunRecordDraft("function")
    with pytest.raises(AttributeError):
        draft.grads_after_step = []  # type: ignore[attr-defined]
    draft.unbound = Unbound(name="config", why="no factory")
    assert draft.freeze().unbound == Unbound(name="config", why="no factory")


def test_a_record_of_another_shape_names_what_is_wrong() -> None:
    data = saved(_script_record())
    with pytest.raises(ProtocolError, match="run record: no protocol version"):
        read_record({k: v for k, v in data.items() if k != VERSION_KEY})
    with pytest.raises(ProtocolError, match=r"run record: unknown field\(s\) grads_after_step"):
        read_record({**data, "grads_after_step": []})
    with pytest.raises(ProtocolError, match=r"run record: missing field\(s\) outputs"):
        read_record({k: v for k, v in data.items() if k != "outputs"})
    with pytest.raises(ProtocolError, match=r"run record.exception: unknown field\(s\) frames"):
        read_record({**data, "exception": {**data["exception"], "frames": []}})
    with pytest.raises(ProtocolError, match="run record.kind: 'notebook' is not one of"):
        read_record({**data, "kind": "notebook"})


def test_a_record_of_another_version_makes_the_verdict_unverified_with_the_reason() -> None:
    other = {**saved(_script_record()), VERSION_KEY: PROTOCOL_VERSION + 1}
    original = _checked(Outcome("ok", "finished", 1.0, "", 0, record=other))
    assert original.status == "harness_error" and original.record is None
    said = f"run record: protocol version {PROTOCOL_VERSION + 1}, this side speaks {PROTOCOL_VERSION}"
    assert said in original.detail
    rewritten = _checked(Outcome("ok", "finished", 1.0, "", 0, record=saved(_script_record())))
    assert isinstance(rewritten.record, RunRecord)
    result = evaluate("train", "script", "script", original, rewritten, ("original_error_gone",))
    assert result.verdict == "unverified" and said in result.reason, result.reason
