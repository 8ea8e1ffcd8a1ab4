"""`--apply` respects the files it writes: symlinks, hard links, owner, mode, read-only
files, and edits made while it ran (issue 10, item 2)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autograd_fix.cli.app import app
from autograd_fix.cli.writes import WriteRefused, allowed_roots, write_user_file

TRAIN = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))
val_loader = [torch.randn(4, 8) for _ in range(6)]
model.eval()
outputs = []
for batch in val_loader:
    outputs.append(model(batch))
print(torch.cat(outputs).sum().item())
"""
FIXED_MARK = "with torch.no_grad():"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def apply(*paths: str):
    return CliRunner().invoke(app, ["--apply", "--no-verify", "--color", "never", *paths], catch_exceptions=False)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    return tmp_path


# -- the write function itself -------------------------------------------------------------
def test_plain_file_is_replaced_atomically_with_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(b"old\n")
    path.chmod(0o640)
    inode = path.stat().st_ino
    write_user_file(str(path), b"new\n", expected_digest=sha(b"old\n"))
    assert path.read_bytes() == b"new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert path.stat().st_ino != inode  # a new file renamed over the old one
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]  # no temporary file left


def test_content_is_compared_just_before_writing(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(b"edited by someone\n")
    with pytest.raises(WriteRefused, match="changed on disk since it was read"):
        write_user_file(str(path), b"new\n", expected_digest=sha(b"old\n"))
    assert path.read_bytes() == b"edited by someone\n"
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]


def test_a_removed_file_is_not_recreated(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    with pytest.raises(WriteRefused, match="removed since it was read"):
        write_user_file(str(path), b"new\n", expected_digest=sha(b"old\n"))
    assert not path.exists()


def test_hard_link_is_rewritten_in_place(tmp_path: Path) -> None:
    path, other = tmp_path / "train.py", tmp_path / "also.py"
    path.write_bytes(b"old\n")
    os.link(path, other)
    write_user_file(str(path), b"new\n", expected_digest=sha(b"old\n"))
    assert other.read_bytes() == b"new\n" and path.stat().st_nlink == 2
    assert path.stat().st_ino == other.stat().st_ino


def test_hard_link_changed_meanwhile_is_not_overwritten(tmp_path: Path) -> None:
    path, other = tmp_path / "train.py", tmp_path / "also.py"
    path.write_bytes(b"old\n")
    os.link(path, other)
    other.write_bytes(b"edited through the other name\n")
    with pytest.raises(WriteRefused, match="changed on disk"):
        write_user_file(str(path), b"new\n", expected_digest=sha(b"old\n"))
    assert path.read_bytes() == b"edited through the other name\n"


def test_read_only_file_is_refused_even_for_root(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(b"old\n")
    path.chmod(0o444)
    with pytest.raises(WriteRefused, match=r"read-only \(mode 0444\)"):
        write_user_file(str(path), b"new\n", expected_digest=sha(b"old\n"))
    assert path.read_bytes() == b"old\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_file_of_another_user_keeps_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(b"old\n")
    os.chown(path, 1, 1)
    path.chmod(0o664)
    write_user_file(str(path), b"new\n", expected_digest=sha(b"old\n"))
    info = path.stat()
    assert path.read_bytes() == b"new\n"
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (1, 1, 0o664)


def test_symlink_is_written_through_to_its_target(tmp_path: Path) -> None:
    target, link = tmp_path / "real.py", tmp_path / "link.py"
    target.write_bytes(b"old\n")
    link.symlink_to("real.py")
    written = write_user_file(str(link), b"new\n", expected_digest=sha(b"old\n"), roots=allowed_roots([str(tmp_path)]))
    assert link.is_symlink() and os.readlink(link) == "real.py"
    assert target.read_bytes() == b"new\n" and written == str(target)


def test_symlink_leaving_the_named_roots_is_refused(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "elsewhere").mkdir()
    target = tmp_path / "elsewhere" / "real.py"
    target.write_bytes(b"old\n")
    (tmp_path / "src" / "link.py").symlink_to(target)
    with pytest.raises(WriteRefused, match="outside the paths given"):
        write_user_file(str(tmp_path / "src" / "link.py"), b"new\n", expected_digest=sha(b"old\n"),
                        roots=allowed_roots([str(tmp_path / "src")]))
    assert target.read_bytes() == b"old\n"


@pytest.mark.skipif(not hasattr(os, "setxattr"), reason="extended attributes are Linux-only here")
def test_extended_attributes_survive_the_atomic_replace(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(b"old\n")
    try:
        os.setxattr(path, "user.reviewed", b"yes")
    except OSError:
        pytest.skip("this file system does not take user xattrs")
    write_user_file(str(path), b"new\n", expected_digest=sha(b"old\n"))
    assert os.getxattr(path, "user.reviewed") == b"yes"


# -- through the command line --------------------------------------------------------------
def test_apply_writes_through_a_symlink_and_keeps_the_link(project: Path) -> None:
    (project / "src" / "real.py").write_text(TRAIN)
    (project / "src" / "train.py").symlink_to("real.py")
    result = apply("src/train.py")
    assert result.exit_code == 0, result.output
    assert (project / "src" / "train.py").is_symlink()
    assert FIXED_MARK in (project / "src" / "real.py").read_text()


def test_apply_refuses_a_symlink_out_of_the_tree_and_goes_on(project: Path) -> None:
    (project / "shared").mkdir()
    outside = project / "shared" / "common.py"
    outside.write_text(TRAIN)
    (project / "src" / "common.py").symlink_to(outside)
    (project / "src" / "train.py").write_text(TRAIN)
    result = apply("src")
    assert result.exit_code == 2
    assert f"error: src/common.py: is a symlink to {outside}, outside the paths given; not written" in result.stderr
    assert outside.read_text() == TRAIN
    assert FIXED_MARK in (project / "src" / "train.py").read_text()
    # the refused file is not counted as fixed, nor as not checked
    assert "Fixed 1 finding in 1 file; 1 remaining; not verified (--no-verify); 1 file not written." in result.stdout


def test_apply_keeps_a_hard_link(project: Path) -> None:
    path = project / "src" / "train.py"
    path.write_text(TRAIN)
    os.link(path, project / "backup.py")
    assert apply("src").exit_code == 0
    assert path.stat().st_nlink == 2 and FIXED_MARK in (project / "backup.py").read_text()


def test_apply_leaves_a_read_only_file_alone_with_an_error(project: Path) -> None:
    path = project / "src" / "train.py"
    path.write_text(TRAIN)
    path.chmod(0o444)
    other = project / "src" / "eval.py"
    other.write_text(TRAIN)
    result = apply("src")
    assert result.exit_code == 2
    assert "error: src/train.py: is read-only (mode 0444); not written" in result.stderr
    assert path.read_text() == TRAIN and stat.S_IMODE(path.stat().st_mode) == 0o444
    assert FIXED_MARK in other.read_text()
    assert "Fixed 1 finding in 1 file; 1 remaining; not verified (--no-verify); 1 file not written." in result.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_apply_keeps_the_owner_of_someone_elses_file(project: Path) -> None:
    path = project / "src" / "train.py"
    path.write_text(TRAIN)
    os.chown(path, 1, 1)
    assert apply("src").exit_code == 0
    assert FIXED_MARK in path.read_text()
    assert (path.stat().st_uid, path.stat().st_gid) == (1, 1)


def test_apply_refused_write_shows_in_json_and_sarif_errors(project: Path) -> None:
    path = project / "src" / "train.py"
    path.write_text(TRAIN)
    path.chmod(0o444)
    result = CliRunner().invoke(app, ["--apply", "--no-verify", "--format", "json", "src"], catch_exceptions=False)
    summary = json.loads(result.stdout)["summary"]
    assert result.exit_code == 2
    assert summary["fixed"] == 0
    assert summary["errors"] == [{"path": "src/train.py", "message": "is read-only (mode 0444); not written"}]
    result = CliRunner().invoke(app, ["--apply", "--no-verify", "--format", "sarif", "src"], catch_exceptions=False)
    (invocation,) = json.loads(result.stdout)["runs"][0]["invocations"]
    assert invocation["executionSuccessful"] is False
    assert "is read-only (mode 0444); not written" in json.dumps(invocation["toolExecutionNotifications"])
    assert path.read_text() == TRAIN


def test_report_file_behind_a_symlink_stays_a_symlink(project: Path) -> None:
    (project / "src" / "train.py").write_text(TRAIN)
    (project / "reports").mkdir()
    (project / "reports" / "latest.json").write_text("{}")
    (project / "report.json").symlink_to("reports/latest.json")
    result = CliRunner().invoke(app, ["--format", "json", "-o", "report.json", "src"], catch_exceptions=False)
    assert result.exit_code == 1, result.output  # findings remain
    assert (project / "report.json").is_symlink()
    assert '"findings"' in (project / "reports" / "latest.json").read_text()


def test_two_runs_do_not_both_count_the_same_fix(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another run fixes the file after this one read it: this run's write is refused
    (the bytes changed), so only one of them says it fixed it."""
    from autograd_fix.cli import app as app_module

    path = project / "src" / "eval.py"
    path.write_text(TRAIN)
    real_run_jobs = app_module.run_jobs

    def other_run_writes_first(jobs, workers, on_done=None, on_outcome=None):
        def then_ours(outcome):
            write_user_file(str(path), outcome.fixed.encode(), expected_digest=sha(TRAIN.encode()))
            on_outcome(outcome)

        return real_run_jobs(jobs, workers, on_done, then_ours)

    monkeypatch.setattr(app_module, "run_jobs", other_run_writes_first)
    result = apply("src")
    assert result.exit_code == 2
    assert "error: src/eval.py: changed on disk since it was read; not overwritten (run again)" in result.stderr
    assert "Fixed 0 findings in 0 files; 1 remaining; not verified (--no-verify); 1 file not written." in result.stdout
    assert path.read_text().count(FIXED_MARK) == 1


def test_a_folder_that_takes_no_new_file_gets_an_in_place_rewrite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Root may create files in a 0555 folder anyway: the refusal is simulated."""
    import tempfile

    path = tmp_path / "train.py"
    path.write_bytes(b"old\n")
    inode = path.stat().st_ino

    def no_temporary_file(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", no_temporary_file)
    write_user_file(str(path), b"new\n", expected_digest=sha(b"old\n"))
    assert path.read_bytes() == b"new\n" and path.stat().st_ino == inode


def swap_after_the_check(monkeypatch: pytest.MonkeyPatch, target: Path, swap) -> None:
    """Run `swap()` right after the write's own `lstat` of `target` (its check; an
    `islink` comes first): the race of a hostile tree, made deterministic."""
    from autograd_fix.cli import writes

    real_lstat, calls = os.lstat, []

    def lstat_then_swap(path, *args, **kwargs):
        info = real_lstat(path, *args, **kwargs)
        if os.fspath(path) == str(target):
            calls.append(path)
            if len(calls) == 2:
                swap()
        return info

    monkeypatch.setattr(writes.os, "lstat", lstat_then_swap)


@pytest.mark.parametrize("linked", [False, True], ids=["replaced atomically", "rewritten in place"])
def test_a_symlink_swapped_in_after_the_check_is_never_written_through(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, linked: bool) -> None:
    """The file is checked, then replaced by a symlink to a file outside the named path
    before the write: the write must be refused and the outside file untouched."""
    project, outside = tmp_path / "project", tmp_path / "outside.py"
    project.mkdir()
    target = project / "train.py"
    target.write_bytes(b"old\n")
    outside.write_bytes(b"precious\n")
    if linked:  # a second hard link: the in-place rewrite path
        os.link(target, project / "train_link.py")

    def to_symlink() -> None:
        os.unlink(target)
        os.symlink(outside, target)

    swap_after_the_check(monkeypatch, target, to_symlink)
    with pytest.raises(WriteRefused, match="replaced by a symlink since it was checked"):
        write_user_file(str(target), b"new\n", expected_digest=hashlib.sha256(b"old\n").hexdigest(), roots=[str(project)])
    assert outside.read_bytes() == b"precious\n"


def test_another_file_swapped_in_after_the_check_is_not_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "train.py"
    target.write_bytes(b"old\n")
    os.link(target, tmp_path / "hard.py")

    def to_another_inode() -> None:
        os.unlink(target)
        target.write_bytes(b"old\n")  # the same bytes in another file

    swap_after_the_check(monkeypatch, target, to_another_inode)
    with pytest.raises(WriteRefused, match="replaced since it was checked"):
        write_user_file(str(target), b"new\n", expected_digest=hashlib.sha256(b"old\n").hexdigest())
    assert target.read_bytes() == b"old\n" and (tmp_path / "hard.py").read_bytes() == b"old\n"
