"""The language server verifies under the interpreter an editor names in its
initialization options (`{"python": PATH}`), as `--python` does on the command line."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, client_capabilities

from test_cli_verification import SCRIPT as RUNNABLE
from test_server import EditorClient, _diagnostics, _editor_client, _open, _uri

pytestmark = pytest.mark.asyncio(loop_scope="module")
MISSING = "/no/such/env/bin/python"


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "autograd_fix", "server"], client_factory=_editor_client),
    scope="module",
)
async def client(lsp_client: EditorClient):
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"), root_uri=None, initialization_options={"python": MISSING},
        )
    )
    yield
    await lsp_client.shutdown_session()


async def test_the_editors_python_is_the_one_verification_uses(client: EditorClient, tmp_path: Path) -> None:
    path = tmp_path / "evaluate.py"
    path.write_text(RUNNABLE)
    uri = _uri(path)
    _open(client, uri, RUNNABLE)
    await _diagnostics(client, uri, 1)
    result: Any = await asyncio.wait_for(
        client.workspace_execute_command_async(types.ExecuteCommandParams(command="autograd-fix.verifyAndApply", arguments=[uri])),
        120,
    )
    (verdict,) = result["verdicts"]
    assert verdict["verdict"] == "unverified" and not result["applied"]
    assert verdict["reason"].startswith(f"not run: the Python chosen for verification, {MISSING} (--python), does not exist")
