"""autograd-fix: find and rewrite PyTorch autograd pitfalls, verified by execution."""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("autograd-fix")
except _metadata.PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
