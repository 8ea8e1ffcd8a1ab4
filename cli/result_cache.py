"""A per-file cache of static-check findings, under `.autograd-fix_cache/` as Ruff's.

Why: a re-run over a tree that did not change (timm: 315 files, ~20 s cold) should cost
the reading and hashing of the files, not their analysis. An entry holds one file's
findings as typed records (`FindingRecord`'s fields, validated on the way back in) and
the key they depend on: the file's bytes (sha256), the effective settings of the job
(selected and ignored codes, unsafe-fixes, target torch, role vocabulary, size limit),
the tool's version and a fingerprint of its installed code (so a rule edited in a
development install is not answered from an old entry) and Python's version.

What is not cached, by design (the data-flow rule: verdicts are never cached unless
keyed by everything they depend on, which a static key is not):
- verification verdicts and fixed texts: only plain reports (no `--diff` / `--apply`)
  read or write the cache;
- fix products (diffs, patched texts for JSON/SARIF): an entry whose findings carry a
  fix answers only jobs that need no fix products; other jobs re-run the file;
- notebooks, stdin, files with errors and `doctor`'s site fixes.

Concurrency: an entry is written to a temporary file in the same folder and renamed
over the old one (atomic on POSIX and Windows), so a reader sees a whole entry or none;
two runs writing the same entry write the same thing. An entry that cannot be read or
does not validate is a miss, and is rewritten. A folder that cannot be written turns
the cache off for the run with one warning (`CacheWarning`), never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from autograd_fix.cli.runner import FileOutcome, FindingRecord, Job

CACHE_DIR_NAME = ".autograd-fix_cache"
#: bump when an entry's layout changes
SCHEMA = 1
#: the environment variable naming another cache folder (as `RUFF_CACHE_DIR`)
CACHE_DIR_ENV = "AUTOGRAD_FIX_CACHE_DIR"
#: `FindingRecord` fields an entry stores, with their types (checked on load)
_STORED: dict[str, tuple[type, ...]] = {
    "line": (int,), "column": (int,), "end_line": (int,), "end_column": (int,),
    "code": (str,), "name": (str,), "message": (str,),
    "fix_applicability": (str, type(None)), "fix_applies": (bool,), "plan_id": (str, type(None)),
}


def default_cache_dir(project_root: Path | None) -> Path:
    """`$AUTOGRAD_FIX_CACHE_DIR`, else `.autograd-fix_cache` in the project root (the
    folder of the configuration used), else in the current folder."""
    named = os.environ.get(CACHE_DIR_ENV)
    if named:
        return Path(named)
    return (project_root or Path.cwd()) / CACHE_DIR_NAME


def code_fingerprint() -> str:
    """Version, Python and the installed code's file stamps (size, mtime): cheap (a stat
    per module, no import), and it changes whenever a rule's source does."""
    from autograd_fix import __version__

    digest = hashlib.sha256(f"{__version__}|{sys.version_info[:3]}".encode())
    roots = sorted(set(_package_folders()))
    for root in [r for r in roots if not any(r != other and other in r.parents for other in roots)]:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
            for name in sorted(filenames):
                if name.endswith(".py"):
                    stat = os.stat(os.path.join(dirpath, name))
                    digest.update(f"{os.path.relpath(os.path.join(dirpath, name), root)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _package_folders() -> list[Path]:
    """Where `autograd_fix`'s modules live: an installed wheel holds them in one
    folder; an editable install maps each subpackage (`codemods`, `cli`,
    `verification`) from its own folder of the source tree."""
    import autograd_fix
    import autograd_fix.cli
    import autograd_fix.codemods
    import autograd_fix.verification

    packages = (autograd_fix, autograd_fix.cli, autograd_fix.codemods, autograd_fix.verification)
    return [Path(folder).resolve() for package in packages for folder in getattr(package, "__path__", [])]


def job_key(job: Job, content_digest: str, fingerprint: str) -> str:
    """Everything a job's findings depend on, hashed."""
    settings = (
        SCHEMA, fingerprint, os.path.abspath(job.path), content_digest, job.select, job.ignore, job.unsafe_fixes,
        str(job.target_torch), _vocabulary_key(job), job.max_bytes,
        # what other files say (a grad-disabling decorator defined elsewhere)
        job.project.fingerprint if job.project is not None else None,
    )
    return hashlib.sha256(repr(settings).encode()).hexdigest()


def _vocabulary_key(job: Job) -> tuple[object, ...]:
    """The role vocabulary in a stable order (a frozenset's order changes from one
    process to the next with string hashing)."""
    roles = job.roles
    return (
        tuple(tuple(sorted(tokens)) for tokens in roles.tokens_by_role),
        tuple(sorted((name, role.value) for name, role in roles.objects)),
    )


def _needs_fix_products(job: Job) -> bool:
    return job.compute_fix or job.fix_diffs or job.fix_texts or bool(job.sites)


def cacheable_job(job: Job) -> bool:
    """Jobs the cache may answer: files on disk, not notebooks, no `doctor` sites."""
    from autograd_fix.cli.notebook import is_notebook

    return job.data is None and not job.sites and not is_notebook(job.path)


@dataclass
class CacheLookup:
    """A cacheable job's key, the sha256 of the bytes hashed for it, and the cached
    outcome on a hit."""

    key: str
    digest: str
    outcome: FileOutcome | None = None


@dataclass
class CacheWarning:
    """Why the cache was turned off for this run (printed once)."""

    message: str


class ResultCache:
    """Entries of one run's cache folder; `warning` is set once writing failed."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.fingerprint = code_fingerprint()
        self.warning: CacheWarning | None = None
        self._ready = False

    def _entry_path(self, job: Job) -> Path:
        name = hashlib.sha256(os.path.abspath(job.path).encode()).hexdigest()[:32]
        return self.folder / f"v{SCHEMA}" / f"{name}.json"

    def lookup(self, job: Job) -> CacheLookup | None:
        """The job's key and, on a hit, its cached outcome; None when the job cannot be
        cached (stdin, a notebook, a file that cannot be read: the check reports it)."""
        if not cacheable_job(job):
            return None
        from autograd_fix.codemods.source import SourceError, read_bytes

        try:  # the check's own reader: regular files only, never blocks on a FIFO, size-capped
            data = read_bytes(job.path, job.max_bytes)
        except (SourceError, OSError):
            return None
        content = hashlib.sha256(data).hexdigest()
        found = CacheLookup(job_key(job, content, self.fingerprint), content)
        entry = _read_entry(self._entry_path(job))
        if entry is None or entry.get("key") != found.key:
            return found
        records = _records(entry.get("findings"), job.path)
        if records is None:
            return found
        if _needs_fix_products(job) and any(r.fix_applicability is not None for r in records):
            return found  # its fixes' diffs and texts are not cached: re-run the file
        from autograd_fix.cli.runner import FileOutcome
        from autograd_fix.codemods.source import decode_source

        try:  # the text too, for what reads the source (fingerprints of SARIF and GitLab)
            source = decode_source(data)
        except SourceError:
            return found
        found.outcome = FileOutcome(
            path=job.path, findings=records, original=source.text, encoding=source.encoding, bom=source.bom, digest=content,
        )
        return found

    def store(self, job: Job, found: CacheLookup, outcome: FileOutcome) -> None:
        """Write `outcome` as the entry for `key` when it may be cached and the file read
        by the check is the one hashed for the key."""
        if self.warning is not None or outcome.error or outcome.notebook is not None or outcome.fixed is not None:
            return
        if outcome.digest != found.digest:
            return  # edited between the hash and the check
        entry = {"schema": SCHEMA, "key": found.key, "findings": [_stored(r) for r in outcome.findings]}
        try:
            self._prepare()
            _write_atomically(self._entry_path(job), json.dumps(entry, separators=(",", ":")))
        except OSError as error:
            self.warning = CacheWarning(
                f"cache folder {self.folder} cannot be written ({error.strerror or error}); running without a cache "
                "(--no-cache turns it off, AUTOGRAD_FIX_CACHE_DIR moves it)"
            )

    def _prepare(self) -> None:
        """Create the folder with a `.gitignore` of `*` (so that git ignores it, wherever
        it is) and a `CACHEDIR.TAG` (so that backup tools skip it)."""
        if self._ready:
            return
        (self.folder / f"v{SCHEMA}").mkdir(parents=True, exist_ok=True)
        ignore = self.folder / ".gitignore"
        if not ignore.exists():
            _write_atomically(ignore, "# Automatically created by autograd-fix.\n*\n")
        tag = self.folder / "CACHEDIR.TAG"
        if not tag.exists():
            _write_atomically(
                tag, "Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by autograd-fix.\n"
            )
        self._ready = True


def _read_entry(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            entry = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("schema") != SCHEMA:
        return None
    return entry


def _stored(record: FindingRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in _STORED}


def _records(items: Any, path: str) -> list[FindingRecord] | None:
    """The entry's findings as `FindingRecord`s, or None when any field is missing or of
    the wrong type (a corrupt or foreign entry)."""
    from autograd_fix.cli.runner import FindingRecord

    if not isinstance(items, list):
        return None
    known = {f.name for f in fields(FindingRecord)}
    records = []
    for item in items:
        if not isinstance(item, dict) or set(item) != set(_STORED) or not set(item) <= known:
            return None
        for name, types in _STORED.items():
            value = item[name]
            if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
                return None
        records.append(FindingRecord(path=path, **item))
    return records


def _write_atomically(path: Path, text: str) -> None:
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def run_cached(
    jobs: list[Job],
    cache: ResultCache | None,
    run: Callable[[list[Job]], list[FileOutcome]],
    on_done: Callable[[int], None] | None = None,
) -> list[FileOutcome]:
    """Outcomes in the order of `jobs`: the cache's where it has them, `run`'s for the
    others (each stored afterwards); `on_done` counts the hits."""
    if cache is None:
        return run(jobs)
    lookups = [cache.lookup(job) for job in jobs]
    misses = [index for index, found in enumerate(lookups) if found is None or found.outcome is None]
    hits = len(jobs) - len(misses)
    if hits and on_done is not None:
        on_done(hits)
    checked = run([jobs[index] for index in misses])
    outcomes: list[FileOutcome | None] = [found.outcome if found is not None else None for found in lookups]
    for index, outcome in zip(misses, checked):
        outcomes[index] = outcome
        found = lookups[index]
        if found is not None:
            cache.store(jobs[index], found, outcome)
    return [outcome for outcome in outcomes if outcome is not None]
