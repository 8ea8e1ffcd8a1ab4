"""What a doctor run hands on: `Finding` (a source line, a rule code, the evidence
measured) and `Diagnosis` (how the run ended, and its findings), with the codes that
no rule fixes and each code's title (the report's legend, SARIF's rule descriptions).

Plain frozen records: the CLI, the fixes from findings and the benchmarks read them;
the analysis that makes them is in `findings` and the modules it composes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

#: anomaly mode on where the run did not see it turned on, and autograd crashes no rule
#: explains (no rule fixes them)
ANOMALY_LEFTOVER = "DOC001"
AUTOGRAD_CRASH = "DOC003"
#: anomaly mode or empty_cache() left in the training run: the rule's own code
DEBUG_LEFTOVER = "AGF017"

#: what each code says, as the report's legend and SARIF's rule descriptions
TITLES = {
    "AGF001": "forward pass builds a graph no backward uses",
    "AGF002": "optimizer step sees gradients of earlier steps",
    "AGF003": "in-place change of a tensor autograd saved",
    "AGF004": "custom backward disagrees with finite differences",
    "AGF006": "graph kept across iterations by an accumulator",
    "AGF008": "parameters receive no gradient",
    "AGF010": "hidden state carries the graph of earlier iterations",
    "AGF011": "retained graph never used again",
    "AGF013": "requires_grad misspelled: the parameters it meant to freeze are trained",
    "AGF014": "reentrant checkpoint cuts its parameters off the graph",
    "AGF019": "accumulated micro-batch gradients stepped on unscaled (a mean loss not divided)",
    DEBUG_LEFTOVER: "anomaly detection or torch.cuda.empty_cache() left in the training run",
    ANOMALY_LEFTOVER: "anomaly detection on in the training loop (where it was turned on not seen)",
    AUTOGRAD_CRASH: "autograd error",
}

Reader = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Finding:
    """One bug the run showed: where (path relative to the project root, 1-based line),
    which rule, what was measured."""

    code: str
    path: str
    line: int
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Diagnosis:
    """The outcome of one doctor run: how the run ended, and its findings."""

    script: str
    status: str  # finished | crashed | timeout | memory | exited | harness_error | unavailable
    detail: str
    findings: tuple[Finding, ...] = ()
    shortened: tuple[dict[str, Any], ...] = ()
    measures: dict[str, Any] = field(default_factory=dict)
    isolated: bool = True
    #: why another script than the one named was run (a library file's driver)
    via: str = ""
    #: the project root the paths are relative to
    root: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["findings"] = [f.to_json() for f in self.findings]
        data["shortened"] = list(self.shortened)
        return data
