"""Jupyter notebooks: discovery, cell positions, IPython masking, per-cell diffs, writing
back only the changed cells, bad notebooks, concurrent edits, and verification."""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path

import nbformat
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from typer.testing import CliRunner

import autograd_fix.cli.app as app_module
from autograd_fix.cli.app import app
from autograd_fix.cli.magics import mask_cell
from autograd_fix.cli.notebook import load_notebook
from autograd_fix.cli.verify_command import _read, verify_app

SETUP = "import torch\nfrom torch import nn\n\ntorch.manual_seed(0)\nmodel = nn.Linear(8, 2)\nval_batches = [torch.randn(4, 8) for _ in range(3)]"
EVAL = "model.eval()\nscores = []\nfor batch in val_batches:\n    scores.append(model(batch))\nprint(len(scores))"
EVAL_FIXED = (
    "model.eval()\nscores = []\nwith torch.no_grad():\n    for batch in val_batches:\n"
    "        scores.append(model(batch))\nprint(len(scores))"
)


def notebook(*cells, **metadata) -> nbformat.NotebookNode:
    made = [new_code_cell(cell) if isinstance(cell, str) else cell for cell in cells]
    return new_notebook(cells=made, metadata=metadata or {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}})


def write(path: Path, nb: nbformat.NotebookNode) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def run(*args: str, input: bytes | None = None, verify: bool = False):
    extra = [] if verify or not {"--diff", "--apply"} & set(args) else ["--no-verify"]
    return CliRunner().invoke(app, [*extra, "--color", "never", *args], input=input, catch_exceptions=False)


def eval_notebook() -> nbformat.NotebookNode:
    evaluated = new_code_cell(EVAL, execution_count=3, outputs=[new_output("stream", name="stdout", text="3\n")])
    return notebook(new_markdown_cell("# Evaluation"), SETUP, new_markdown_cell("## Validation"), evaluated)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


# -- discovery and configuration ----------------------------------------------------------
def test_folders_are_searched_for_notebooks_but_not_checkpoints(project: Path) -> None:
    write(project / "nbs" / "eval.ipynb", eval_notebook())
    write(project / "nbs" / ".ipynb_checkpoints" / "eval-checkpoint.ipynb", eval_notebook())
    result = run("nbs")
    assert result.stdout.splitlines()[0].startswith("nbs/eval.ipynb:cell 4:3:1: AGF001 [*]")
    assert result.stdout.count("AGF001") == 1
    (finding,) = json.loads(run("--format", "json", "nbs").stdout)["findings"]
    assert (finding["cell"], finding["line"], finding["end_line"], finding["end_column"]) == (4, 3, 4, 31)
    assert run("nbs/eval.ipynb").stdout.count("AGF001") == 1  # named directly


def test_exclude_and_extend_include_apply(project: Path) -> None:
    write(project / "drafts" / "old.ipynb", eval_notebook())
    (project / "tool.pyw").write_text(SETUP + "\n" + EVAL + "\n")
    assert sorted(line.split(":")[0] for line in run(".").stdout.splitlines()[:-1]) == ["drafts/old.ipynb"]
    (project / "pyproject.toml").write_text('[tool.autograd-fix]\nexclude = ["drafts/"]\nextend-include = ["*.pyw"]\n')
    assert [line.split(":")[0] for line in run(".").stdout.splitlines()[:-1]] == ["tool.pyw"]
    (project / "pyproject.toml").write_text('[tool.autograd-fix]\nextend-include = "*.pyw"\n')
    bad = run(".")
    assert bad.exit_code == 2 and "extend-include must be a list of strings" in bad.stderr


# -- positions -----------------------------------------------------------------------------
def test_later_cells_see_earlier_cells_and_positions_count_every_cell(project: Path) -> None:
    defining = "import torch\nweights = torch.randn(3, requires_grad=True)"
    using = "weights.mul_(0.5)"
    write(project / "nb.ipynb", notebook(defining, new_markdown_cell("text"), new_code_cell(""), using))
    result = run("--format", "json", "nb.ipynb")
    (finding,) = json.loads(result.stdout)["findings"]
    assert (finding["code"], finding["cell"], finding["line"], finding["column"]) == ("AGF003", 4, 1, 1)
    assert run("nb.ipynb").stdout.startswith("nb.ipynb:cell 4:1:1: AGF003")
    # the same cell without the one that makes `weights` require grad: nothing to find
    write(project / "alone.ipynb", notebook("import torch", using))
    assert "AGF003" not in run("alone.ipynb").stdout


def test_noqa_in_a_cell_suppresses(project: Path) -> None:
    write(project / "nb.ipynb", notebook(SETUP, EVAL.replace("for batch in val_batches:", "for batch in val_batches:  # noqa: AGF001")))
    assert run("nb.ipynb").stdout.strip() == "No findings."


def test_python_files_have_no_cell_in_json(project: Path) -> None:
    (project / "eval.py").write_text(SETUP + "\n" + EVAL + "\n")
    (finding,) = json.loads(run("--format", "json", "eval.py").stdout)["findings"]
    assert finding["cell"] is None and finding["line"] == 9


# -- IPython masking -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "line",
    ["%matplotlib inline", "!pip install -q torch", "files = !ls data", "model?", "??model", "    %time run(x)", "t = %timeit -o f()"],
)
def test_ipython_lines_are_masked_line_for_line(line: str) -> None:
    cell = f"for x in range(2):\n    pass\n{line}\nprint(1)"
    masked = mask_cell(cell, "tok")
    assert masked.text.count("\n") == cell.count("\n")
    assert line not in masked.text.splitlines()
    assert list(masked.restore.values()) == [line]
    compile(masked.text, "cell", "exec")


@pytest.mark.parametrize(
    "cell",
    ['s = """\n!not a shell line\n"""', "total = f(a,\n        !b)", "x = 5 % 3\ny = x != 2", "print('why?')  # really?"],
)
def test_python_that_looks_like_ipython_is_left_alone(cell: str) -> None:
    assert mask_cell(cell, "tok").restore == {}


def test_cell_magics_mask_the_cell_unless_its_body_is_python() -> None:
    bash = mask_cell("%%bash\necho hi\nls -l", "tok")
    assert len(bash.restore) == 3
    timed = mask_cell("%%time\nfor x in y:\n    f(x)", "tok")
    assert list(timed.restore.values()) == ["%%time"] and "for x in y:" in timed.text


def test_magics_survive_a_fix_elsewhere_in_the_cell(project: Path) -> None:
    cell = "%load_ext autoreload\n" + EVAL + "\nfiles = !ls\nmodel?"
    path = write(project / "nb.ipynb", notebook(SETUP, cell))
    assert run("--apply", "nb.ipynb").exit_code == 0
    source = nbformat.read(str(path), as_version=4).cells[1].source
    assert source == "%load_ext autoreload\n" + EVAL_FIXED + "\nfiles = !ls\nmodel?"


def test_a_fix_that_would_touch_a_magic_line_is_dropped(project: Path) -> None:
    cell = EVAL.replace("    scores.append", "    !echo batch\n    scores.append")
    path = write(project / "nb.ipynb", notebook(SETUP, cell))
    before = path.read_bytes()
    report = run("nb.ipynb")
    assert "AGF001 evaluation loop" in report.stdout and "[*]" not in report.stdout
    assert "no fix: it would change an IPython magic line" in report.stdout
    applied = run("--apply", "nb.ipynb")
    assert applied.exit_code == 1 and path.read_bytes() == before  # the finding stays


LINES = st.sampled_from(
    [
        "import torch", "x = torch.ones(2)", "", "for i in range(2):", "    y = x * i", "    !echo step",
        "%matplotlib inline", "files = !ls", "x?", "s = '''", "!inside a string", "'''", "# !comment",
        "total = (1 +", "       2)", "print('done?')", "%%bash",
    ]
)


@settings(max_examples=80, deadline=None)
@given(cells=st.lists(st.lists(LINES, max_size=8), max_size=5), final_newline=st.booleans(), markdown_first=st.booleans())
def test_program_round_trips_to_the_cells_and_positions(cells: list[list[str]], final_newline: bool, markdown_first: bool) -> None:
    """Whatever the cells hold, the program maps back to exactly their sources, and
    each cell line sits at its own position (masked lines restore to the original; a cell
    that does not parse on its own is left out as blank lines at its positions)."""
    sources = ["\n".join(lines) + ("\n" if final_newline and lines else "") for lines in cells]
    made = ([new_markdown_cell("intro")] if markdown_first else []) + [new_code_cell(text) for text in sources]
    loaded = load_notebook(nbformat.writes(new_notebook(cells=made)).encode())
    program, nb_map = loaded.source.text, loaded.map
    offset = 1 if markdown_first else 0
    assert nb_map.cell_sources(program) == {index + offset: text for index, text in enumerate(sources)}
    program_lines = program.split("\n")
    for index, text in enumerate(sources):
        span = nb_map.cells[index]
        for number, line in enumerate(text.splitlines(), start=1):
            assert nb_map.locate(span.first_line + number - 1) == (index + offset + 1, number)
            shown = program_lines[span.first_line + number - 2]
            assert nb_map.restore.get(shown, shown) == ("" if span.number in nb_map.unparsable else line)


def test_a_notebook_of_more_than_ten_code_cells_maps_back(project: Path) -> None:
    # vit-pytorch's examples/cats_and_dogs.ipynb: the boundary after cell 1 is a prefix
    # of the one after cell 12, which once read as "a cell boundary moved" and crashed
    sources = [f"step_{n} = {n}" for n in range(14)]
    loaded = load_notebook(nbformat.writes(new_notebook(cells=[new_code_cell(t) for t in sources])).encode())
    assert loaded.map.cell_sources(loaded.source.text) == dict(enumerate(sources))
    path = write(project / "long.ipynb", new_notebook(cells=[new_code_cell(t) for t in sources]))
    result = run("--no-verify", str(path))
    assert result.exit_code == 0, result.output
    assert "No findings." in result.output


# -- diff and apply ------------------------------------------------------------------------
def test_diff_is_per_cell_and_names_the_cell(project: Path) -> None:
    path = write(project / "nb.ipynb", eval_notebook())
    before = path.read_bytes()
    result = run("--diff", "nb.ipynb")
    assert result.exit_code == 1 and path.read_bytes() == before
    assert result.stdout.startswith("--- a/nb.ipynb:cell 4\n+++ b/nb.ipynb:cell 4\n@@ -1,5 +1,6 @@\n")
    assert "+with torch.no_grad():\n" in result.stdout
    assert "No newline" not in result.stdout


def _keys(text: str) -> list:
    """Every object's keys, in file order: what a rewrite must not reorder."""
    found: list = []
    json.loads(text, object_pairs_hook=lambda pairs: found.append([key for key, _ in pairs]) or dict(pairs))
    return found


@pytest.mark.parametrize(
    ("indent", "newline", "trailing", "as_list", "sort_keys"),
    [(1, "\n", True, True, True), (2, "\n", False, False, False), (4, "\r\n", True, True, False)],
    ids=["jupyter-style", "indent2-string-sources-unsorted-no-final-newline", "indent4-crlf"],
)
def test_apply_rewrites_only_the_changed_cell_and_keeps_the_json_style(
    project: Path, indent: int, newline: str, trailing: bool, as_list: bool, sort_keys: bool
) -> None:
    raw = json.loads(nbformat.writes(eval_notebook()))
    raw["metadata"] = {"z_last": 1, "a_first": {"note": "ünïcode"}}
    for cell in raw["cells"]:
        cell["source"] = cell["source"] if as_list else "".join(cell["source"])
        cell["metadata"] = {"tags": ["keep"]}
        if not sort_keys:
            del cell["id"]  # nbformat 4.5 wants ids; a notebook without them gets none added
    text = json.dumps(raw, indent=indent, sort_keys=sort_keys, ensure_ascii=False).replace("\n", newline)
    text += newline if trailing else ""
    path = project / "nb.ipynb"
    path.write_bytes(text.encode("utf-8"))

    assert run("--apply", "nb.ipynb").exit_code == 0
    written = path.read_bytes().decode("utf-8")
    new = json.loads(written)
    assert "".join(new["cells"][3]["source"]) == EVAL_FIXED
    assert isinstance(new["cells"][3]["source"], list) is as_list
    for key in ("metadata", "nbformat", "nbformat_minor"):
        assert new[key] == raw[key]
    for old_cell, new_cell in zip(raw["cells"], new["cells"]):
        assert {k: v for k, v in old_cell.items() if k != "source"} == {k: v for k, v in new_cell.items() if k != "source"}
    assert new["cells"][3]["outputs"][0]["text"] and new["cells"][3].get("id") == raw["cells"][3].get("id")
    assert _keys(written) == _keys(text)
    assert written.endswith(newline) is trailing and ("\r\n" in written) is (newline == "\r\n")
    # only lines of the changed cell's source differ
    changed = [line for line in difflib.ndiff(text.splitlines(), written.splitlines()) if line[:2] in ("- ", "+ ")]
    assert changed and all("torch.no_grad" in line or "scores.append" in line or "for batch in" in line or '"source"' in line for line in changed)
    assert run("--check", "nb.ipynb").exit_code == 0


def test_stdin_notebook_is_fixed_to_stdout(project: Path) -> None:
    data = nbformat.writes(eval_notebook()).encode()
    result = run("--apply", "-", "--stdin-filename", "nb.ipynb", input=data)
    assert result.exit_code == 0
    assert nbformat.reads(result.stdout, as_version=4).cells[3].source == EVAL_FIXED
    clean = nbformat.writes(notebook(SETUP)).encode()
    assert run("--apply", "-", "--stdin-filename", "nb.ipynb", input=clean).stdout.encode() == clean


# -- bad input -----------------------------------------------------------------------------
BAD = {
    "invalid.ipynb": ('{"cells": [', "invalid JSON at line 1"),
    "nocells.ipynb": ('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}}', "no `cells` list"),
    "old.ipynb": ('{"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": []}', "nbformat 3 notebooks are not supported"),
    "schema.ipynb": ('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code"}]}', "not a valid nbformat 4 notebook"),
}


def test_bad_notebooks_are_per_file_errors_and_the_run_goes_on(project: Path) -> None:
    for name, (content, _) in BAD.items():
        (project / name).write_text(content)
    broken = write(project / "syntax.ipynb", notebook(SETUP, "for batch in val_batches:\n    model(batch"))
    good = write(project / "good.ipynb", eval_notebook())
    before = {path: path.read_bytes() for path in project.iterdir()}
    result = run("--apply", ".")
    assert result.exit_code == 2
    for name, (_, message) in BAD.items():
        assert f"error: {name}: " in result.stderr and message in result.stderr
    assert "error: syntax.ipynb: syntax error at cell 2:2:10: '(' was never closed" in result.stderr
    for path, data in before.items():
        assert (path.read_bytes() == data) is (path != good)
    assert broken.read_bytes() == before[broken]


def test_a_file_changed_during_the_run_is_not_overwritten(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb_path = write(project / "nb.ipynb", eval_notebook())
    py_path = project / "eval.py"
    py_path.write_text(SETUP + "\n" + EVAL + "\n")
    real_run_jobs = app_module.run_jobs

    def run_then_someone_edits(jobs, workers, on_done=None, on_outcome=None):
        """Both files are edited after they were read, before the first is written."""
        outcomes = real_run_jobs(jobs, workers, on_done)
        for path in (nb_path, py_path):
            path.write_bytes(path.read_bytes().replace(b"val_batches", b"test_batches"))
        for outcome in outcomes:
            if on_outcome is not None:
                on_outcome(outcome)
        return outcomes

    monkeypatch.setattr(app_module, "run_jobs", run_then_someone_edits)
    result = run("--apply", ".")
    assert result.exit_code == 2
    for path in (nb_path, py_path):
        assert f"error: {path.name}: changed on disk since it was read; not overwritten" in result.stderr
        assert b"test_batches" in path.read_bytes() and b"no_grad" not in path.read_bytes()


# -- verification --------------------------------------------------------------------------
@pytest.mark.torch
def test_example_notebook_is_verified_and_fixed_in_place_with_outputs_kept(project: Path, repo_root: Path) -> None:
    path = project / "eval_in_notebook.ipynb"
    shutil.copy(repo_root / "examples" / "eval_in_notebook.ipynb", path)
    before = nbformat.read(str(path), as_version=4)
    result = run("--apply", "eval_in_notebook.ipynb", verify=True)
    assert result.exit_code == 0, result.stderr
    assert "fixed eval_in_notebook.ipynb:cell 7:3:1: AGF001" in result.stdout
    # a bounded run: the notebook's training loop is capped, the evaluation runs in full
    assert "[accepted: script driver (top-level code) shortened (loop `for " in result.stdout
    assert "): outputs equal (at a second point too), .grad untouched" in result.stdout
    after = nbformat.read(str(path), as_version=4)
    assert "with torch.no_grad():\n    for inputs, targets in val_batches:" in after.cells[6].source
    assert [cell.get("outputs") for cell in after.cells] == [cell.get("outputs") for cell in before.cells]
    assert [cell.source for cell in after.cells[:6]] == [cell.source for cell in before.cells[:6]]


@pytest.mark.torch
def test_a_verdict_names_the_cell_where_a_run_raised(project: Path) -> None:
    """A later cell backpropagates through the evaluation outputs: the fix breaks it,
    and the rejection points at that cell, in the rewritten run's own line numbers."""
    write(project / "nb.ipynb", notebook(SETUP, EVAL, "total = torch.cat(scores)\ntotal.sum().backward()"))
    result = run("--diff", "--format", "json", "nb.ipynb", verify=True)
    (finding,) = json.loads(result.stdout)["findings"]
    verification = finding["verification"]
    assert verification["verdict"] == "rejected"
    assert "at cell 3, line 2: total.sum().backward()" in verification["reason"]
    assert verification["evidence"]["__main__"]["rewritten"]["exception"]["where"] == "cell 3, line 2: total.sum().backward()"


def test_verify_command_reads_notebooks_as_their_cells_program(project: Path) -> None:
    """`autograd-fix verify a.ipynb b.ipynb` compares the cells' programs, not the JSON
    (which is a valid Python dict literal); a broken notebook is a usage error."""
    write(project / "a.ipynb", notebook(SETUP, "%time " + EVAL.splitlines()[0], EVAL))
    program = _read(project / "a.ipynb")
    assert program.startswith(SETUP) and "%time" not in program and EVAL in program
    (project / "bad.ipynb").write_text('{"cells": [')
    result = CliRunner().invoke(verify_app, [str(project / "a.ipynb"), str(project / "bad.ipynb")])
    assert result.exit_code == 2 and "cannot read" in result.stderr and "invalid JSON" in result.stderr


def test_a_future_import_in_a_later_cell_does_not_block_fixes(project: Path) -> None:
    # vit-pytorch's cats_and_dogs.ipynb: `from __future__ import print_function` in its
    # second cell is valid there (Jupyter compiles each cell alone), though the cells
    # joined into one file are not; fixes are checked cell by cell, as Jupyter runs them
    write(project / "nb.ipynb", notebook("import torch", "from __future__ import print_function\n" + SETUP, EVAL))
    assert run("--apply", "nb.ipynb").exit_code == 0
    cells = [cell.source for cell in nbformat.read(str(project / "nb.ipynb"), as_version=4).cells]
    assert cells[2] == EVAL_FIXED


def test_a_fix_that_breaks_a_cell_is_still_refused(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autograd_fix.cli import notebook_check

    write(project / "nb.ipynb", eval_notebook())
    before = (project / "nb.ipynb").read_bytes()
    checked = notebook_check.check_cells_compile  # the fixed program (only) fails its cells' check
    monkeypatch.setattr(
        notebook_check,
        "check_cells_compile",
        lambda nb_map, text: "syntax error at cell 4:1:1: x" if "no_grad" in text else checked(nb_map, text),
    )
    result = run("--apply", "nb.ipynb")
    assert "does not compile (syntax error at cell 4:1:1: x)" in result.output
    assert (project / "nb.ipynb").read_bytes() == before


def test_a_cell_that_does_not_parse_is_a_per_cell_error_and_the_other_cells_are_analysed(project: Path) -> None:
    # a course notebook's exercise cell (`lr = `) must not hide the evaluation loop below it
    exercise = "# TODO: choose a learning rate\nlr = "
    path = write(project / "course.ipynb", notebook(SETUP, exercise, EVAL))
    before = path.read_bytes()
    result = run("--no-verify", "course.ipynb")
    assert "course.ipynb:cell 3:3:1: AGF001" in result.stdout
    assert "error: course.ipynb: syntax error at cell 2:2:6" in result.stderr
    assert "the other cells were analysed" in result.stderr
    assert run("--apply", "course.ipynb").exit_code == 2
    assert path.read_bytes() == before  # a notebook with a cell that does not parse is not rewritten
