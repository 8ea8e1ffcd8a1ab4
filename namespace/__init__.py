"""autograd-fix: find and rewrite PyTorch autograd pitfalls, verified by execution."""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    """`__version__`, read from the installed metadata on first use: importing
    `importlib.metadata` costs about as much as Python's own start-up, and most runs
    (`--help`, a run answered by the cache) never print the version."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import metadata

    try:
        version = metadata.version("autograd-fix")
    except metadata.PackageNotFoundError:  # running from a source tree without install
        version = "0.0.0+unknown"
    globals()["__version__"] = version
    return version
