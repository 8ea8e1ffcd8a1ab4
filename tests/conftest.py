"""Shared fixtures: a clean environment for the CLI and paths to the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


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
