"""A memory cgroup per run, where this process may make one: memory a run holds through
``memfd_create`` (no address-space limit counts it, no file system is sized for it)
counts against the run's limit like any other.

A run joins its cgroup first thing after the fork, before it confines itself; the job
removes the cgroup once the run and everything it started are gone. The kernel then
kills a run that goes over (``SIGKILL``), which `oom_killed` tells apart from a crash.

Where no cgroup can be made (a user without a delegated cgroup, cgroup v2 without the
memory controller handed down, no cgroup file system) `base` says why, and memory held
through memfd is limited only by each file's size limit (``RLIMIT_FSIZE``) and the
number of descriptors a run may hold: the README says so.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

#: the prefix of a run's cgroup, then the worker's pid as the tool knows it
PREFIX = "agf-run-"


def _mount_point(version: int) -> str | None:
    """Where this process sees the cgroup file system that holds the memory controller."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                left, _, right = line.partition(" - ")
                fields, kinds = left.split(), right.split()
                if len(fields) < 5 or len(kinds) < 3:
                    continue
                if version == 2 and kinds[0] == "cgroup2":
                    return fields[4]
                if version == 1 and kinds[0] == "cgroup" and "memory" in kinds[2].split(","):
                    return fields[4]
    except OSError:
        return None
    return None


def base() -> tuple[str, int] | str:
    """(the folder of this process's memory cgroup, the cgroup version) when runs can
    have cgroups made under it, else why not."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            lines = [line.rstrip("\n").split(":", 2) for line in handle if line.count(":") >= 2]
    except OSError:
        return "no /proc/self/cgroup"
    for number, controllers, path in lines:
        if "memory" in controllers.split(","):
            mount = _mount_point(1)
            folder = os.path.join(mount, path.lstrip("/")) if mount else None
            if folder and os.path.isfile(os.path.join(folder, "memory.limit_in_bytes")):
                return (folder, 1) if os.access(folder, os.W_OK) else f"the memory cgroup {folder} is not writable"
    for number, controllers, path in lines:
        if number == "0" and controllers == "":
            mount = _mount_point(2)
            folder = os.path.join(mount, path.lstrip("/")) if mount else None
            if not folder:
                break
            try:
                with open(os.path.join(folder, "cgroup.subtree_control")) as handle:
                    handed_down = "memory" in handle.read().split()
            except OSError:
                handed_down = False
            if not handed_down:
                return f"the memory controller is not enabled for the cgroups under {folder}"
            return (folder, 2) if os.access(folder, os.W_OK) else f"the cgroup {folder} is not writable"
    return "no memory cgroup"


@dataclass(frozen=True)
class RunCgroup:
    """One run's memory cgroup."""

    path: str
    version: int

    @classmethod
    def make(cls, parent: str, version: int, owner: int, limit_mb: int) -> "RunCgroup | None":
        """A cgroup under `parent` capped at `limit_mb`; None where the kernel refuses."""
        path = os.path.join(parent, f"{PREFIX}{owner}-{os.urandom(6).hex()}")
        try:
            os.mkdir(path)
        except OSError:
            return None
        made = cls(path, version)
        limit = str(limit_mb * 1024 * 1024)
        try:
            if version == 1:
                made._write("memory.limit_in_bytes", limit)
            else:
                made._write("memory.max", limit)
                made._write("memory.swap.max", "0", required=False)
        except OSError:
            made.remove()
            return None
        return made

    def _write(self, name: str, text: str, required: bool = True) -> None:
        try:
            with open(os.path.join(self.path, name), "w") as handle:
                handle.write(text)
        except OSError:
            if required:
                raise

    def join(self) -> None:
        """Move the calling process in (in the run child, right after the fork)."""
        self._write("cgroup.procs", "0")

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the run for going over the limit."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            with open(os.path.join(self.path, name)) as handle:
                for line in handle:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and value.strip().isdigit():
                        return int(value) > 0
        except OSError:
            pass
        return False

    def remove(self) -> None:
        """Remove it (its processes are gone; the kernel may take a moment to see it)."""
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.01)


def remove_stale(parent: str) -> None:
    """Remove the cgroups of workers that died without removing theirs (killed)."""
    from .isolation import remove_orphans

    remove_orphans(parent, PREFIX)
