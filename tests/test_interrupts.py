"""Incremental, interruptible runs (issue 10, item 4): each file is written as soon as its
fixes are decided; Ctrl-C and SIGTERM stop cleanly, saying what was and was not written;
no temporary folder and no process outlives the run, even when the worker is killed.

The CLI runs as a real process (`cli_process`), in its own empty TMPDIR."""

from __future__ import annotations

import os
import signal
import textwrap
import time
from pathlib import Path

import pytest

from cli_process import CliProcess, children_of, kill_quietly, start_cli, wait_until_gone

FIXED_MARK = "with torch.no_grad():"


def slow_eval_script(seconds: float) -> str:
    """A runnable evaluation script with an AGF001 bug (a safe, verified fix) whose
    verification takes at least `seconds` (both sides run the script)."""
    return textwrap.dedent(
        f"""\
        import time

        import torch
        from torch import nn

        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))
        val_loader = [torch.randn(4, 8) for _ in range(3)]
        model.eval()
        outputs = []
        for batch in val_loader:
            outputs.append(model(batch))
        time.sleep({seconds})
        print(torch.cat(outputs).sum().item())
        """
    )


def kill_quietly_pid(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    return root


@pytest.fixture
def running():
    started: list[CliProcess] = []
    yield started
    for cli in started:
        kill_quietly(cli)


def files(project: Path, count: int, seconds: float) -> list[Path]:
    paths = []
    for number in range(count):
        path = project / f"eval_{number}.py"
        path.write_text(slow_eval_script(seconds))
        paths.append(path)
    return paths


def assert_nothing_left(cli: CliProcess) -> None:
    assert wait_until_gone(cli.tmpdir) == [], "processes outlived the run"
    assert sorted(p.name for p in cli.tmpdir.iterdir()) == [], "temporary folders outlived the run"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "group"), [(signal.SIGINT, True), (signal.SIGTERM, False), (signal.SIGHUP, False)],
    ids=["ctrl-c-to-the-group", "sigterm", "sighup (the terminal closed)"],
)
@pytest.mark.torch
def test_interrupt_keeps_written_files_says_which_and_leaves_nothing(
    project: Path, tmp_path: Path, running: list[CliProcess], signum: int, group: bool
) -> None:
    paths = files(project, 4, seconds=2.0)
    original = paths[0].read_text()
    cli = start_cli(["--apply", "-j", "1", "."], project, tmp_path / "tmp")
    running.append(cli)
    # without a terminal: one progress line per decided file, as it happens
    first = cli.wait_for_stderr(lambda line: "eval_0.py: written" in line, timeout=240)
    assert first.startswith("autograd-fix: [1/4] eval_0.py: written (1 fix)")
    assert FIXED_MARK in paths[0].read_text()  # on disk before the run ends
    assert all(p.read_text() == original for p in paths[1:])
    cli.signal(signum, group=group)
    code = cli.finish()
    assert code == 128 + signum
    stderr = cli.stderr
    assert "autograd-fix: interrupted" in stderr and "Traceback" not in stderr
    assert "written: eval_0.py" in stderr
    for path in paths[2:]:
        assert f"not written: {path.name}" in stderr
        assert path.read_text() == original
    assert FIXED_MARK in paths[0].read_text()
    assert_nothing_left(cli)


@pytest.mark.slow
def test_interrupting_a_large_static_apply_lists_exactly_the_files_on_disk(
    project: Path, tmp_path: Path, running: list[CliProcess]
) -> None:
    """`--no-verify`, a process pool: files are written as their chunk comes back; after
    Ctrl-C the "written:" lines name exactly the files that changed."""
    source = slow_eval_script(0)
    paths = []
    for number in range(300):
        path = project / f"m{number:03}.py"
        path.write_text(source)
        paths.append(path)
    cli = start_cli(["--apply", "--no-verify", "-j", "2", "."], project, tmp_path / "tmp")
    running.append(cli)
    # the event: the first file written. Then the pool's workers are stopped at once, so
    # that the run cannot finish the other chunks (hundreds of files) before Ctrl-C
    # lands, however fast the machine; they go on once the tool has the signal.
    deadline = time.monotonic() + 120
    while not any(FIXED_MARK in p.read_text() for p in paths) and time.monotonic() < deadline:
        time.sleep(0.002)
    workers = children_of(cli.proc.pid)
    for pid in workers:
        os.kill(pid, signal.SIGSTOP)
    try:
        cli.signal(signal.SIGINT)
        time.sleep(0.2)  # not a bound: the tool acts on the signal whether or not this passed
    finally:
        for pid in workers:
            kill_quietly_pid(pid, signal.SIGCONT)
    assert cli.finish() == 130, cli.stderr
    listed = {line.split(": ", 1)[1] for line in cli.stderr.splitlines() if line.startswith("written: ")}
    changed = {p.name for p in paths if FIXED_MARK in p.read_text()}
    assert changed and listed == changed
    assert len(changed) < len(paths)  # it did stop early
    assert_nothing_left(cli)


@pytest.mark.slow
@pytest.mark.torch
def test_a_killed_worker_leaves_no_folder_and_the_run_goes_on(project: Path, tmp_path: Path, running: list[CliProcess]) -> None:
    (path,) = files(project, 1, seconds=30.0)
    cli = start_cli(["--diff", "--color", "never", "."], project, tmp_path / "tmp")
    running.append(cli)
    worker = None
    for _ in range(2400):  # the worker, once it has forked the patch's job
        workers = children_of(cli.proc.pid)
        if workers and children_of(workers[0]):
            worker = workers[0]
            break
        if cli.proc.poll() is not None:
            break
        time.sleep(0.1)
    assert worker is not None, cli.stderr
    os.kill(worker, signal.SIGKILL)
    code = cli.finish()
    assert code == 1, cli.stderr  # the unverified finding remains; no error
    assert "unverified" in cli.stdout and "verification" in cli.stdout
    assert path.read_text() == slow_eval_script(30.0)
    assert_nothing_left(cli)


@pytest.mark.slow
@pytest.mark.torch
def test_a_finished_run_leaves_no_temporary_folder(project: Path, tmp_path: Path, running: list[CliProcess]) -> None:
    (path,) = files(project, 1, seconds=0.0)
    cli = start_cli(["--apply", "."], project, tmp_path / "tmp")
    running.append(cli)
    assert cli.finish(timeout=240) == 0, cli.stderr
    assert FIXED_MARK in path.read_text()
    assert "autograd-fix: [1/1] eval_0.py: written (1 fix)" in cli.stderr
    assert_nothing_left(cli)


# -- the pieces, in-process ----------------------------------------------------------------
def test_a_signal_during_a_write_waits_for_the_write_to_finish() -> None:
    from autograd_fix.cli.interrupts import Interrupted, StopSignals

    done = []
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted) as stopped:
        with StopSignals() as stops:
            with stops.held():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)  # the handler has run by now, and only noted it
                done.append("write finished")
    assert done == ["write finished"]
    assert stopped.value.exit_code == 143
    assert signal.getsignal(signal.SIGTERM) == before  # handlers restored


@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGQUIT], ids=["sighup", "sigquit"])
def test_hangup_and_quit_stop_the_run_like_ctrl_c(signum: int) -> None:
    from autograd_fix.cli.interrupts import Interrupted, StopSignals

    with pytest.raises(Interrupted) as stopped:
        with StopSignals():
            os.kill(os.getpid(), signum)
            time.sleep(1)  # the handler raises here, at once
    assert stopped.value.exit_code == 128 + signum


def test_a_hangup_ignored_by_nohup_stays_ignored() -> None:
    from autograd_fix.cli.interrupts import StopSignals

    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with StopSignals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)  # ignored: nothing raised
    finally:
        signal.signal(signal.SIGHUP, before)


def test_each_file_is_decided_before_the_next_file_is_verified(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first file's patches all get verdicts, and the file is handed on (to be
    written), before any patch of the second file is sent: nothing waits for the end."""
    from autograd_fix.cli import verify_patches
    from autograd_fix.cli.runner import Job, check_file
    from autograd_fix.verification import api
    from autograd_fix.verification.verdict import Verdict

    events: list[tuple[str, str]] = []

    def stream(next_pair, on_verdict, **kwargs):
        while (item := next_pair()) is not None:
            key, pair = item
            events.append(("verify", pair["path"]))
            on_verdict(key, Verdict("accepted", "stub", pair["rule"]))

    monkeypatch.setattr(api, "verify_stream", stream)
    two_loops = slow_eval_script(0) + "for batch in val_loader:\n    outputs.append(model(batch))\n"
    jobs = [
        Job(path=name, select=None, ignore=(), unsafe_fixes=False, compute_fix=False, fix_diffs=False, data=two_loops.encode())
        for name in ("a.py", "b.py")
    ]
    outcomes = [check_file(job) for job in jobs]
    assert all(len(o.findings) == 2 for o in outcomes)
    verify_patches.verify_and_compose(
        outcomes, jobs, verify_patches.VerifySettings(), False, None, verifier=object(),
        on_decided=lambda outcome: events.append(("decided", outcome.path)),
    )
    assert events == [("verify", "a.py"), ("verify", "a.py"), ("decided", "a.py"),
                      ("verify", "b.py"), ("verify", "b.py"), ("decided", "b.py")]
    assert all(o.fixed is not None and o.fixed.count("with torch.no_grad():") == 2 for o in outcomes)


def test_progress_lines_only_without_a_terminal() -> None:
    import io

    from rich.console import Console

    from autograd_fix.cli.progress import file_lines

    terminal = Console(file=io.StringIO(), force_terminal=True)
    assert file_lines(terminal, 3) is None
    buffer = io.StringIO()
    note = file_lines(Console(file=buffer, force_terminal=False, width=40), 2)
    note("src/a_rather_long_path/to/some/module.py", "written (2 fixes)")
    note("src/b.py", "no fix accepted; unchanged")
    assert buffer.getvalue().splitlines() == [
        "autograd-fix: [1/2] src/a_rather_long_path/to/some/module.py: written (2 fixes)",
        "autograd-fix: [2/2] src/b.py: no fix accepted; unchanged",
    ]


def test_an_interrupt_outside_the_run_still_exits_128_plus_the_signal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C while files are being found: no "Aborted!" and exit 1 (click's way), but
    one line and 130."""
    from autograd_fix.cli import app as app_module
    from autograd_fix.cli import file_settings
    from autograd_fix.cli.interrupts import Interrupted

    def interrupted(*args, **kwargs):
        raise Interrupted(signal.SIGINT)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(file_settings, "discover", interrupted)
    with pytest.raises(SystemExit) as exited:
        app_module.main(["."])
    assert exited.value.code == 130
    err = capsys.readouterr().err
    assert err.strip() == "autograd-fix: interrupted (Ctrl-C)." and "Aborted" not in err
