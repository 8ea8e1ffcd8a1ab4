"""A hostile repository the user points autograd-fix at: what it holds must not run
outside the sandbox, and its configuration must not lower the sandbox's guard.

Each test plants what an attacker would (a module named like the standard library's, a
`pyproject.toml` that turns isolation off or asks for the user's secrets, a
configuration file owned by someone else) and checks that it had no effect.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograd_fix.cli.app import app
from autograd_fix.cli.config import load_config as load_cli_config
from autograd_fix.verification import Verifier, verify_pair
from autograd_fix.verification.client import worker_command
from autograd_fix.verification.config import load_config
from autograd_fix.verification.namespaces import check
from autograd_fix.verification.trust import UserConfigError, UserSettings, load_user_settings, user_config_path

UNAVAILABLE = check()
needs_namespaces = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"no namespaces here: {UNAVAILABLE}")

#: standard-library modules the worker imports while it starts and serves requests
SHADOWED = ("selectors", "json", "signal", "socket", "tempfile", "traceback", "sitecustomize", "usercustomize")

BASE = "import torch\nx = torch.ones(3, requires_grad=True)\ntotal = float((x * 2).sum())\n"


def plant_modules(folder: Path, marker: Path) -> None:
    """Modules named like the standard library's that record where they ran, then
    load the real module, so that a process importing them keeps working."""
    for name in SHADOWED:
        (folder / f"{name}.py").write_text(textwrap.dedent(f"""
            import os as _os, sys as _sys, importlib as _importlib
            with open({str(marker)!r}, "a") as _handle:
                _handle.write("{name} ran in %d\\n" % _os.getpid())
            _here = _os.path.dirname(_os.path.abspath(__file__))
            del _sys.modules[__name__]
            _saved = _sys.path[:]
            _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
            try:
                globals().update(_importlib.import_module(__name__).__dict__)
            except ImportError:
                pass
            finally:
                _sys.path[:] = _saved
            """))


def planted_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A repository of planted modules that is the current folder and on PYTHONPATH:
    (its script, the marker file a planted module writes when it runs)."""
    repo, marker = tmp_path / "repo", tmp_path / "marker"
    repo.mkdir()
    plant_modules(repo, marker)
    script = repo / "train.py"
    script.write_text(BASE + "print(total)\n")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("PYTHONPATH", str(repo))  # a habit of ML repositories: PYTHONPATH=.
    return script, marker


@pytest.mark.torch
def test_the_worker_never_imports_from_the_folder_it_was_started_in(tmp_path, monkeypatch):
    script, marker = planted_repository(tmp_path, monkeypatch)
    with Verifier() as verifier:
        assert verifier.ping()
        verdict = verify_pair(BASE, BASE + "total = total * 1\n", path=str(script), verifier=verifier, timeout=20)
    assert verdict.verdict == "accepted", verdict.reason
    assert not marker.exists(), marker.read_text()


@pytest.mark.torch
def test_the_worker_runs_isolated_in_a_folder_of_its_own():
    command = worker_command()
    assert command[1] == "-I" and command[2] == "-c"
    with Verifier() as verifier:
        cwd = os.readlink(f"/proc/{verifier._proc.pid}/cwd")
        assert os.path.realpath(cwd) == os.path.realpath(verifier.scratch)
        with open(f"/proc/{verifier._proc.pid}/cmdline", "rb") as handle:
            assert handle.read().split(b"\0")[1] == b"-I"


@pytest.mark.torch
def test_a_run_still_imports_from_pythonpath_inside_the_sandbox(tmp_path, monkeypatch):
    libs, repo = tmp_path / "libs", tmp_path / "repo"
    libs.mkdir()
    repo.mkdir()
    (libs / "agf_helper_lib.py").write_text("FACTOR = 7\n")
    source = BASE + "import agf_helper_lib\nprint('factor', agf_helper_lib.FACTOR)\n"
    (repo / "train.py").write_text(source)
    monkeypatch.setenv("PYTHONPATH", str(libs))
    verdict = verify_pair(source, source + "total = total * 1\n", path=str(repo / "train.py"), timeout=20)
    assert verdict.verdict == "accepted", verdict.reason
    printed = verdict.units[0].evidence["original"]["stdout_tail"]
    assert "factor 7" in printed


# -- configuration ----------------------------------------------------------------------

def write_user_config(home: Path, text: str) -> Path:
    path = home / "autograd-fix" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def user_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "xdg"
    home.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root


def test_a_repository_cannot_turn_isolation_off_or_pass_the_users_secrets(repo, user_home):
    pyproject = repo / "pyproject.toml"
    pyproject.write_text('[tool.autograd-fix.verify]\nisolation = "off"\npass-env = ["MY_SECRET_TOKEN"]\n')
    config = load_config(str(repo / "train.py"))
    assert config.isolation == "auto" and config.pass_env == ()
    assert len(config.notes) == 2
    assert all(str(pyproject) in note for note in config.notes)
    assert 'ignored isolation = "off"' in config.notes[0] and "ignored pass-env" in config.notes[1]
    assert user_config_path() in config.notes[0]


def test_a_repository_may_still_ask_for_more_safety(repo, user_home):
    (repo / "pyproject.toml").write_text('[tool.autograd-fix.verify]\nisolation = "required"\n')
    config = load_config(str(repo / "train.py"))
    assert config.isolation == "required" and config.notes == ()


def test_the_users_own_settings_win_and_trusted_projects_keep_theirs(repo, user_home, tmp_path):
    (repo / "pyproject.toml").write_text('[tool.autograd-fix.verify]\nisolation = "off"\npass-env = ["WANDB_MODE"]\n')
    write_user_config(user_home, f"""
        [verify]
        pass-env = ["HF_HOME"]
        trusted-projects = [{str(repo)!r}]
        """)
    config = load_config(str(repo / "sub" / "train.py"))
    assert config.isolation == "off" and config.pass_env == ("HF_HOME", "WANDB_MODE") and config.notes == ()
    # the user's own mode wins over a trusted project's
    user = load_user_settings().with_flags("required", ["EXTRA"])
    config = load_config(str(repo / "train.py"), user=user)
    assert config.isolation == "required" and config.pass_env == ("HF_HOME", "EXTRA", "WANDB_MODE")
    # a project beside the trusted one is not trusted
    other = tmp_path / "repo-evil"
    other.mkdir()
    (other / "pyproject.toml").write_text('[tool.autograd-fix.verify]\nisolation = "off"\n')
    assert load_config(str(other / "train.py")).isolation == "auto"


@pytest.mark.parametrize("text, message", [
    ('[verify]\nisolation = "none"\n', "isolation must be one of"),
    ('[verify]\npass-env = "X"\n', "pass-env must be a list"),
    ('[verify]\ntrusted = ["/x"]\n', "unknown keys: verify.trusted"),
    ('isolation = "off"\n', "unknown keys: isolation"),
    ('[verify\n', "config.toml"),
])
def test_a_broken_user_configuration_is_an_error_naming_the_file(user_home, text, message):
    path = write_user_config(user_home, text)
    with pytest.raises(UserConfigError) as error:
        load_user_settings()
    assert message in str(error.value) and str(path) in str(error.value)


def _owned_by_another_user(path: Path, monkeypatch) -> None:
    """Make `path` another user's: really (chown) when running as root, else by making
    this process look like someone else to the ownership check."""
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)
        monkeypatch.delenv("SUDO_UID", raising=False)
    else:
        real = os.geteuid()
        monkeypatch.setattr("autograd_fix.verification.trust.os.geteuid", lambda: real + 1)


def test_a_configuration_file_owned_by_another_user_is_not_read(tmp_path, user_home, monkeypatch):
    parent = tmp_path / "shared"
    project = parent / "mine"
    project.mkdir(parents=True)
    planted = parent / "pyproject.toml"
    planted.write_text('[tool.autograd-fix]\nignore = ["AGF001"]\n[tool.autograd-fix.verify]\nisolation = "off"\n')
    (project / "train.py").write_text("x = 1\n")
    _owned_by_another_user(planted, monkeypatch)
    cli_config = load_cli_config(project)
    assert cli_config.source is None and cli_config.ignore == []
    assert any(str(planted) in note and "owned by another user" in note for note in cli_config.notes)
    verify_config = load_config(str(project / "train.py"))
    assert verify_config.isolation == "auto" and any(str(planted) in note for note in verify_config.notes)
    # the user trusts it: read whoever owns it
    write_user_config(user_home, f"[verify]\ntrusted-projects = [{str(parent)!r}]\n")
    if os.geteuid() != 0:
        real = os.getuid()
        monkeypatch.setattr("autograd_fix.verification.trust.os.geteuid", lambda: real + 1)
    assert load_cli_config(project).ignore == ["AGF001"]


EVAL = textwrap.dedent("""
    import torch
    from torch import nn


    def evaluate(model, loader):
        model.eval()
        correct = 0
        for x, y in loader:
            out = model(x)
            correct += (out.argmax(1) == y).sum().item()
        return correct


    if __name__ == "__main__":
        torch.manual_seed(0)
        model = nn.Linear(4, 3)
        loader = [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(2)]
        print(evaluate(model, loader))
    """)


@needs_namespaces
def test_the_cli_ignores_a_repositorys_isolation_off_and_says_so(repo, user_home, tmp_path, monkeypatch):
    outside = tmp_path / "outside.txt"
    (repo / "pyproject.toml").write_text(
        '[tool.autograd-fix.verify]\nisolation = "off"\npass-env = ["MY_SECRET_TOKEN"]\n')
    (repo / "model.py").write_text(EVAL.replace(
        'if __name__ == "__main__":',
        f'import os\ntry:\n    open({str(outside)!r}, "w").write(os.environ.get("MY_SECRET_TOKEN", "none"))\n'
        f'except OSError:\n    pass\n\nif __name__ == "__main__":'))
    monkeypatch.setenv("MY_SECRET_TOKEN", "hunter2-do-not-leak")
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(app, ["--diff", "model.py", "--format", "json"])
    assert result.exit_code == 1, result.output  # the finding remains; no error
    assert not outside.exists()
    assert "hunter2" not in result.output
    assert f'{repo / "pyproject.toml"}: ignored isolation = "off"' in result.stderr
    assert "ignored pass-env" in result.stderr
    assert '"isolated": true' in result.stdout


@pytest.mark.torch
def test_every_verdict_says_when_runs_were_not_isolated(repo, user_home, monkeypatch):
    (repo / "model.py").write_text(EVAL + "\n\ndef evaluate_twice(model, loader):\n    model.eval()\n"
                                   "    out = model(loader[0][0])\n    return out.sum().item()\n")
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(app, ["--diff", "model.py", "--isolation", "off"])
    verdicts = [line for line in result.stdout.splitlines() if line.startswith("# AGF")]
    assert len(verdicts) >= 2, result.output
    assert all('[runs NOT isolated: isolation = "off"]' in line for line in verdicts), verdicts


def test_a_bad_isolation_flag_is_a_usage_error(repo, user_home, monkeypatch):
    (repo / "model.py").write_text("x = 1\n")
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(app, ["--diff", "model.py", "--isolation", "none"])
    assert result.exit_code == 2
    result = CliRunner().invoke(app, ["--diff", "model.py", "--pass-env", "A=B"])
    assert result.exit_code == 2 and "--pass-env" in result.output


def test_user_settings_from_flags_extend_the_file():
    user = UserSettings(isolation="required", pass_env=("A",)).with_flags(None, ["B", "A"])
    assert user.isolation == "required" and user.pass_env == ("A", "B")


@pytest.mark.torch
def test_a_secret_the_run_got_never_reaches_the_verdict(repo, monkeypatch):
    """Even passed in by the user (--pass-env), a secret the run prints or raises is
    redacted from reasons and evidence: they go to terminals, reports and CI comments."""
    monkeypatch.setenv("MY_SECRET_TOKEN", "hunter2-do-not-leak")
    script = repo / "train.py"
    base = "import os\nimport torch\nx = torch.ones(3)\ntotal = float(x.sum())\n"
    leaky = base + "print(os.environ.get('MY_SECRET_TOKEN'))\nraise RuntimeError('token ' + str(os.environ.get('MY_SECRET_TOKEN')))\n"
    script.write_text(base)
    verdict = verify_pair(base, leaky, path=str(script), timeout=20, user=UserSettings(pass_env=("MY_SECRET_TOKEN",)))
    assert verdict.verdict == "rejected", verdict.reason
    dumped = json.dumps(verdict.to_json())
    assert "hunter2" not in dumped and "hunter2" not in verdict.summary()
    assert "[redacted $MY_SECRET_TOKEN]" in verdict.reason


# -- evidence the run's code cannot forge -----------------------------------------------

FORGE_BASE = "import torch\nx = torch.ones(3, requires_grad=True)\nout = x * 2\nout.sum().backward()\ntotal = float(out.sum())\n"


@pytest.mark.torch
def test_patching_torch_save_cannot_change_the_record(repo):
    """A wrong fix (every output zeroed) that also replaces torch.save: the harness saves
    with the torch.save it held before the run, so the wrong math is still judged
    (rejected), not left without a record."""
    script = repo / "train.py"
    script.write_text(FORGE_BASE)
    wrong = FORGE_BASE.replace("out = x * 2", "out = x * 0") + "torch.save = lambda *args, **kwargs: None\n"
    verdict = verify_pair(FORGE_BASE, wrong, path=str(script), timeout=20)
    assert verdict.verdict == "rejected" and "differ" in verdict.reason, verdict.reason


def _record_fd() -> int:
    """In a run child: the descriptor of its nameless record file."""
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if "agf-run-" in target:
            return int(name)
    raise AssertionError("no record file")


@pytest.mark.torch
def test_a_record_forged_into_the_record_file_is_not_evidence(tmp_path, monkeypatch):
    from autograd_fix.verification.sandbox import Limits, spawn, wait_all
    from autograd_fix.verification.worker import _load, _saver

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)

    def forge():
        import torch

        with os.fdopen(os.dup(_record_fd()), "wb") as handle:  # a captured record, replayed
            torch.save({"autograd_fix_nonce": "0" * 32, "record": {"forged": True}}, handle)
        os._exit(0)

    def scribble_then_finish():
        os.write(_record_fd(), b"forged bytes")
        return {"honest": 1}

    (forged,) = wait_all([spawn(forge, _saver(), Limits(timeout=20))], _load)
    (honest,) = wait_all([spawn(scribble_then_finish, _saver(), Limits(timeout=20))], _load)
    assert forged.status == "harness_error" and "not written by the verification harness" in forged.detail
    assert honest.status == "ok" and honest.record == {"honest": 1}


def test_a_record_the_code_writes_itself_is_never_evidence(repo):
    """The run writes a record of its own (as one captured from a correct fix would be)
    wherever it likes, then leaves before the changed code ran: never accepted."""
    script = repo / "train.py"
    script.write_text(FORGE_BASE)
    wrong = textwrap.dedent("""
        import os, torch
        here = os.path.dirname(os.path.abspath(__file__))
        for folder in (here, os.path.dirname(here), os.path.dirname(os.path.dirname(here))):
            for name in (".autograd_fix_record.pt", "record.pt"):
                try:
                    torch.save({"autograd_fix_nonce": "0" * 32, "record": {}}, os.path.join(folder, name))
                except OSError:
                    pass
        for fd in range(3, 64):  # and into every descriptor it holds
            try:
                os.write(fd, b"forged")
            except OSError:
                pass
        os._exit(0)
        """) + FORGE_BASE.replace("out = x * 2", "out = x * 0")
    verdict = verify_pair(FORGE_BASE, wrong, path=str(script), timeout=20)
    assert verdict.verdict != "accepted", verdict.reason
