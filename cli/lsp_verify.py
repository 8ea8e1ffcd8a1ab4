"""The language server's "verify and apply": the `--diff` verification, on an editor buffer.

The buffer goes through exactly what `autograd-fix --diff FILE` does (one patch per
fix, verified in source order on top of the accepted ones, then the file's fixed text
built from the verdicts), so the editor applies what the command line would write.
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass, field
from typing import Any, Callable

from autograd_fix.cli.lsp_analysis import DocumentAnalysis
from autograd_fix.cli.runner import Job, run_jobs
from autograd_fix.cli.verify_patches import VerifySettings, verify_and_compose


@dataclass
class VerifyReport:
    """What verification decided for one document."""

    #: the document with every allowed fix applied; None when none may be applied
    fixed: str | None = None
    #: one {"code", "line", "column", "verdict", "reason", "applied"} per fix
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    #: what was not taken from the project's configuration, and why (said once each)
    notes: list[str] = field(default_factory=list)

    @property
    def applied_count(self) -> int:
        return sum(1 for verdict in self.verdicts if verdict["applied"])

    @property
    def all_applied(self) -> bool:
        return self.applied_count == len(self.verdicts)

    def summary(self) -> str:
        return "\n".join(
            f"{v['code']} line {v['line']}: {v['verdict']}: {v['reason']}{'' if v['applied'] else ' (not applied)'}"
            for v in self.verdicts
        )


def source_bytes(text: str) -> bytes:
    """The buffer as the file's bytes: in its PEP 263 encoding when it declares one.

    Raises ValueError when the text cannot be written in the encoding it declares.
    """
    encoding = "utf-8"
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(text.encode("utf-8", "surrogatepass")).readline)
    except SyntaxError:
        pass
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    try:
        return text.encode(encoding)
    except (UnicodeEncodeError, LookupError) as error:
        raise ValueError(f"the document cannot be encoded as its declared {encoding}: {error}") from None


def verify_document(
    data: bytes,
    analysis: DocumentAnalysis,
    settings: VerifySettings,
    verifier_factory: Callable[[], Any],
    on_patch: Callable[[int, int], None] | None = None,
) -> VerifyReport:
    """Verify every fix of the buffer `data` (runs for seconds: call it off the event loop);
    `on_patch(done, total)` hears of each patch as its verdict comes (progress)."""
    document = analysis.settings
    job = Job(
        path=analysis.path,
        select=document.select,
        ignore=document.ignore,
        unsafe_fixes=document.unsafe_fixes,
        compute_fix=False,
        fix_diffs=False,
        data=data,
        target_torch=document.target_torch,
        roles=document.roles,
    )
    try:
        outcomes = run_jobs([job], 1)
        outcome = verify_and_compose(
            outcomes, [job], settings, document.unsafe_fixes, None, verifier=verifier_factory(), on_patch=on_patch
        )[0]
    except Exception as error:  # verification must never take the server down
        return VerifyReport(error=f"verification failed ({type(error).__name__}: {error})")
    if outcome.error:
        return VerifyReport(error=outcome.error)
    report = VerifyReport(fixed=outcome.fixed if outcome.fixed != outcome.original else None)
    for record in outcome.findings:
        if record.fix_applicability is None:
            continue
        verification = record.verification
        for note in verification.notes if verification else ():
            if note not in report.notes:
                report.notes.append(note)
        report.verdicts.append(
            {
                "code": record.code,
                "line": record.line,
                "column": record.column,
                "applicability": record.fix_applicability,
                "verdict": verification.verdict.value if verification else "unverified",
                "reason": verification.full_reason if verification else "the fix could not be applied alone",
                "applied": report.fixed is not None and record.fix_applies,
            }
        )
    return report
