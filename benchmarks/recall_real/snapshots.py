"""The repositories of benchmarks/recall_real: read `repos.toml`, write each snapshot's
Python files and notebooks into a work folder.

Snapshots come from the `fetch` tool: a bare git directory per repository under
`/work/.mirror/<owner>+<name>/repo`. Only `.py` and `.ipynb` blobs under the recorded
paths are written (one `git cat-file --batch` per repository, so a 200-file tree takes
a second); a blob the snapshot lacks is skipped and counted. The commit must be the
recorded one: the sites files name lines of that commit.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from autograd_fix.compat import tomllib

HERE = Path(__file__).resolve().parent
MIRROR = Path("/work/.mirror")
SUFFIXES = (".py", ".ipynb")


@dataclass(frozen=True)
class Repo:
    """One measured repository as `repos.toml` records it."""

    name: str  # owner/name
    commit: str
    paths: tuple[str, ...]
    kind: str

    @property
    def slug(self) -> str:
        """`owner+name`: the mirror's folder name, the work folder's and the sites file's."""
        return self.name.replace("/", "+")

    @property
    def sites_file(self) -> Path:
        return HERE / "sites" / f"{self.slug}.toml"


def load_repos(path: Path = HERE / "repos.toml") -> list[Repo]:
    """Every `[[repo]]` of repos.toml, in file order."""
    data = tomllib.loads(path.read_text())
    return [Repo(r["name"], r["commit"], tuple(r["paths"]), r["kind"]) for r in data["repo"]]


def wanted(path: str, prefixes: tuple[str, ...]) -> bool:
    """A Python file or notebook under one of the recorded paths."""
    return path.endswith(SUFFIXES) and any(path.startswith(p) for p in prefixes)


def extract(repo: Repo, target: Path, mirror: Path = MIRROR) -> tuple[int, int]:
    """Write the repository's measured files at its recorded commit into `target`.

    Returns (written, missing). Raises ValueError when the snapshot's commit is not the
    recorded one (its lines would not be the sites' lines).
    """
    git = ["git", f"--git-dir={mirror / repo.slug / 'repo'}"]
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    if head != repo.commit:
        raise ValueError(f"{repo.name}: snapshot at {head}, sites recorded at {repo.commit}")
    listing = subprocess.run([*git, "ls-tree", "-r", "-z", repo.commit], capture_output=True, check=True).stdout
    entries = []
    for entry in filter(None, listing.split(b"\0")):
        meta, _, raw = entry.partition(b"\t")
        mode, kind, blob = meta.decode().split()
        name = raw.decode("utf-8", errors="surrogateescape")
        if kind == "blob" and mode != "120000" and wanted(name, repo.paths):
            entries.append((blob, name))
    batch = subprocess.run(
        [*git, "cat-file", "--batch"], input="".join(f"{b}\n" for b, _ in entries).encode(),
        capture_output=True, check=True,
    ).stdout
    written = missing = 0
    at = 0
    for _, name in entries:
        end = batch.index(b"\n", at)
        header = batch[at:end].split()
        at = end + 1
        if header[-1] == b"missing":
            missing += 1
            continue
        size = int(header[2])
        path = target / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(batch[at:at + size])
        at += size + 1
        written += 1
    (target / ".git").mkdir(parents=True, exist_ok=True)
    return written, missing
