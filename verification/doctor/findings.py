"""From what a run showed to findings: source line, rule code, measured evidence.

Pure functions of the run's record (`watch.Watch.record`, `child.run_doctor_side`) and of
the project's source text (read through `read`, which the caller supplies), so the
decisions can be tested without running anything. No torch here.

`analyse` composes one module per kind of evidence: `unused` (AGF001, AGF011), `steps`
(AGF002, AGF017, AGF019), `held` (AGF006, AGF010, AGF003 for a reused output), `flow` (AGF008, AGF013, AGF014), `functions`
(AGF004) and `crashes` (an autograd error, placed at the bug it shows). A finding carries
the code of the rule whose fix applies at that site (AGF001...), or a ``DOC`` code for
what no rule fixes (`outcome`).
"""

from __future__ import annotations

from typing import Any

from .crashes import crash
from .flow import explained_by_cuts, misspelled, reentrant, silent
from .functions import custom_functions
from .held import holders, recurrent, reused
from .outcome import Finding, Reader
from .steps import leftovers, stale_steps, unscaled_accumulation
from .unused import unused_graphs, unused_retains

def analyse(record: dict[str, Any], script: str, read: Reader, focus: dict[str, Any] | None = None) -> list[Finding]:
    """Every finding a run's record supports (`focus`: the record of the focused
    re-run after an in-place error, if there was one)."""
    seen = record.get("observations") or {}
    stepped = int(seen.get("optimizer_steps") or 0) > 0
    found: list[Finding] = []
    found += unused_graphs(seen, read)
    found += stale_steps(seen, read)
    found += unscaled_accumulation(seen)
    states = recurrent(seen, stepped)
    found += states
    exc = record.get("exception") or {}
    found += reused(seen, str(exc.get("message") or "") if exc.get("autograd") else "")
    found += holders(seen, stepped, read, {f.path for f in states})
    found += silent(seen, script, read)
    found += reentrant(seen)
    found += misspelled(seen, script, read)
    found += custom_functions(seen, read)
    found += unused_retains(seen)
    found += leftovers(seen)
    found += crash(record, script, focus, found, read)
    found = explained_by_cuts(found, read)
    if (record.get("exception") or {}).get("autograd"):
        # the pass whose backward raised was never backpropagated: not a graph built for nothing
        found = [f for f in found if not (f.code == "AGF001" and f.evidence.get("unused_passes") == 1)]
    unique = {(f.code, f.path, f.line): f for f in found}
    return sorted(unique.values(), key=lambda f: (f.path, f.line, f.code))
