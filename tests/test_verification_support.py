"""One warm verification worker shared by the verification test modules.

Pytest gives each module that imports a fixture its own instance, so the worker is kept
in this helper module instead (conftest.py belongs to the cli's tests); it is closed at
interpreter exit by the Verifier's finalizer.
"""

from __future__ import annotations

import functools

from autograd_fix.verification import Verifier


@functools.lru_cache(maxsize=1)
def shared_verifier() -> Verifier:
    return Verifier()


def test_shared_worker_answers():
    assert shared_verifier().ping()
