"""Shared fixtures: a clean environment for the CLI and paths to the repository; and the
static suite: where torch is not installed, what needs it skips with the reason.

Finding bugs needs no torch, so the suite also runs without it (CI does, on Python 3.10
and 3.13: ``pip install -e '.[test-static]'``). There a test that needs torch skips
instead of failing: one marked ``torch``, one that uses the `verifier` fixture, and a
test module that imports torch (its whole module). Where torch is installed, nothing is
skipped for this: a torch that fails to import fails the tests as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from environments import HAS_TORCH, NO_TORCH

REPO = Path(__file__).resolve().parent.parent


class _ModuleWithoutTorch(pytest.Module):
    """A test module that skips as a whole when importing it needs the missing torch (or
    numpy, which the full set-up installs beside torch and the static one does not)."""

    def collect(self):
        try:
            return super().collect()
        except self.CollectError as error:
            cause = error.__cause__
            if isinstance(cause, ModuleNotFoundError) and (cause.name or "").split(".")[0] in ("torch", "numpy"):
                pytest.skip(f"{NO_TORCH}: {self.path.name} imports it", allow_module_level=True)
            raise


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    if HAS_TORCH:
        return None
    return _ModuleWithoutTorch.from_parent(parent, path=module_path)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if HAS_TORCH:
        return
    skip = pytest.mark.skip(reason=NO_TORCH)
    for item in items:
        if item.get_closest_marker("torch") or "verifier" in getattr(item, "fixturenames", ()):
            item.add_marker(skip)


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture(autouse=True, scope="session")
def _no_user_configuration(tmp_path_factory: pytest.TempPathFactory):
    """The tests never read the developer's own ~/.config/autograd-fix/config.toml
    (a trusted project or `isolation = "off"` there would change what they see); a test
    that wants a user configuration writes one under its own XDG_CONFIG_HOME."""
    import os

    saved = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("xdg-config"))
    yield
    if saved is None:
        os.environ.pop("XDG_CONFIG_HOME", None)
    else:
        os.environ["XDG_CONFIG_HOME"] = saved


@pytest.fixture(scope="module")
def verifier():
    """Each test module's own warm verification worker, closed when the module is done:
    no module sees a worker that another module's requests (or notices) went through,
    so results cannot depend on the order modules run in. A module that needs a worker
    started differently defines its own `verifier`."""
    from autograd_fix.verification import Verifier

    with Verifier() as own:
        yield own
