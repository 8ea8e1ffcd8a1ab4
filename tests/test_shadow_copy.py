"""The project copy a verification run works in honours `.gitignore`: a gitignored log
folder of thousands of files neither makes verification refuse nor gets copied, data
folders are linked (read-only) so scripts still read them, and the changed file is
never written through a link into the user's project."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autograd_fix.verification import shadow
from autograd_fix.verification.shadow import ShadowCopies, make_base, make_room

TRAIN = """\
import os
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.load(os.path.join("data", "train.pt"))
for x, y in zip(data["x"], data["y"]):
    optimizer.zero_grad()
    loss = (model(x) - y).pow(2).mean()
    loss.backward()
    optimizer.step()
os.makedirs("lightning_logs/version_2", exist_ok=True)
with open("lightning_logs/version_2/metrics.csv", "w") as handle:
    handle.write(f"{loss.item()}\\n")
print(round(loss.item(), 4))
"""


def lightning_logs(root: Path, files: int) -> None:
    """A Lightning log folder as two earlier runs leave it: versions, events, checkpoints."""
    for index in range(files):
        version = root / "lightning_logs" / f"version_{index % 2}"
        folder = version / "checkpoints" if index % 10 == 0 else version
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"events.out.tfevents.{index}").write_bytes(b"\0" * 64)


def files_in(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() or p.is_symlink()}


def test_a_gitignored_log_folder_of_5200_files_is_mirrored_not_copied(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / ".gitignore").write_text("lightning_logs/\n*.ckpt\n")
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (root / "train.py").write_text(TRAIN)
    lightning_logs(root, 5200)
    made = make_base(str(root), str(tmp_path / "base"))
    base = tmp_path / "base"
    assert made.files < 20 and made.mirrored == 1
    logs = base / "lightning_logs"
    assert logs.is_dir() and not logs.is_symlink()  # a run may add version_2 to it
    assert sorted(p.name for p in logs.iterdir()) == ["version_0", "version_1"]
    assert all(p.is_symlink() and p.resolve() == root / "lightning_logs" / p.name for p in logs.iterdir())


def test_the_limit_still_holds_for_the_projects_own_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    for index in range(12):
        (root / "src" / f"m{index}.py").write_text("x = 1\n")
    lightning_logs(root, 200)  # not gitignored here, but a log folder by its name
    monkeypatch.setattr(shadow, "MAX_ENTRIES", 20)
    assert make_base(str(root), str(tmp_path / "base")).mirrored == 1
    (root / "src" / "more").mkdir()
    for index in range(12):
        (root / "src" / "more" / f"n{index}.py").write_text("x = 1\n")
    with pytest.raises(shadow.ShadowError, match="more than 20 files.*gitignore"):
        make_base(str(root), str(tmp_path / "base2"))


def test_data_folders_are_linked_read_only_and_small_outputs_copied(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "data" / "images").mkdir(parents=True)
    (root / "data" / "images" / "0.png").write_bytes(b"png")
    (root / "data" / "train.pt").write_bytes(b"\0" * (shadow.COPY_LIMIT_BYTES + 1))
    (root / "data" / "labels.csv").write_text("0,1\n")
    (root / "outputs").mkdir()
    (root / "outputs" / "results.json").write_text("{}")
    (root / "scratch" / "old").mkdir(parents=True)
    (root / "scratch" / "old" / "a.txt").write_text("a")
    (root / ".gitignore").write_text("scratch/\n")
    (root / "train.py").write_text(TRAIN)
    make_base(str(root), str(tmp_path / "base"))
    base = tmp_path / "base"
    assert (base / "data" / "images").is_symlink() and (base / "data" / "train.pt").is_symlink()
    assert (base / "data" / "labels.csv").is_file() and not (base / "data" / "labels.csv").is_symlink()
    assert not (base / "outputs" / "results.json").is_symlink()  # a run may overwrite it
    assert (base / "scratch" / "old").is_symlink()
    assert (base / "data" / "images" / "0.png").read_bytes() == b"png"  # read through the link


def test_a_flat_folder_of_many_files_is_one_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "proj"
    (root / "datasets").mkdir(parents=True)
    for index in range(30):
        (root / "datasets" / f"{index}.jpg").write_bytes(b"j")
    monkeypatch.setattr(shadow, "MIRROR_LIMIT", 10)
    made = make_base(str(root), str(tmp_path / "base"))
    assert (tmp_path / "base" / "datasets").is_symlink() and made.files == 1


def test_the_changed_file_is_never_in_a_linked_folder(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "experiments" / "exp1").mkdir(parents=True)
    (root / "experiments" / "exp1" / "train.py").write_text(TRAIN)
    (root / "experiments" / "exp1" / "helpers.py").write_text("K = 3\n")
    (root / ".gitignore").write_text("experiments/\n")
    with ShadowCopies() as copies:
        made = copies.for_root(str(root))
        assert Path(made.base, "experiments", "exp1").is_symlink()
        again = copies.for_file(str(root), str(root / "experiments" / "exp1" / "train.py"))
        folder = Path(again.base, "experiments", "exp1")
        assert folder.is_dir() and not folder.is_symlink()
        assert not (folder / "train.py").is_symlink() and (folder / "helpers.py").read_text() == "K = 3\n"
        make_room(again, "experiments/exp1/train.py")  # a second patch of the same file: nothing to do
        assert not folder.is_symlink()


def test_a_device_or_fifo_in_a_mirrored_folder_is_never_read(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "logs").mkdir(parents=True)
    os.mkfifo(root / "logs" / "pipe")
    (root / "logs" / "run.log").write_text("ok\n")
    make_base(str(root), str(tmp_path / "base"))  # a FIFO that were opened would block here
    assert sorted(p.name for p in (tmp_path / "base" / "logs").iterdir()) == ["run.log"]


@pytest.mark.slow
def test_a_script_reading_data_and_writing_logs_is_verified(tmp_path: Path, verifier) -> None:
    import torch

    from autograd_fix.verification import verify_pair

    root = tmp_path / "proj"
    (root / "data").mkdir(parents=True)
    torch.save({"x": torch.randn(3, 4), "y": torch.randn(3, 2)}, root / "data" / "train.pt")
    (root / ".gitignore").write_text("lightning_logs/\ndata/\n")
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    lightning_logs(root, 5200)
    script = root / "train.py"
    script.write_text(TRAIN)
    rewritten = TRAIN.replace("print(round(loss.item(), 4))", "print(round(float(loss.item()), 4))")
    verdict = verify_pair(TRAIN, rewritten, path=str(script), verifier=verifier, timeout=60)
    assert verdict.verdict == "accepted", verdict.reason
    assert not (root / "lightning_logs" / "version_2").exists()  # written in the copy only
    assert files_in(root / "data") == {"train.pt"}
