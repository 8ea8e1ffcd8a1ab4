"""benchmarks/recall_real: the yardstick of recall on unseen code must match findings to the
hand-written sites as documented (span, cell, rule; optional places; findings nobody
listed count as false until judged) and its candidate search must not lose a notebook to
one cell that does not parse."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

RECALL_REAL = Path(__file__).resolve().parents[1] / "benchmarks" / "recall_real"


@pytest.fixture()
def measure(monkeypatch):
    monkeypatch.syspath_prepend(str(RECALL_REAL))
    monkeypatch.syspath_prepend(str(RECALL_REAL.parent))
    for name in ("measure", "snapshots", "candidates", "recall_search"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import measure as module

    return module


SITES = """
repo = "someone/gan"
commit = "0000000000000000000000000000000000000000"
sites = [
  { file = "gan.py", line = 12, span = [10, 20], rule = "AGF001", status = "real", why = "sampling" },
  { file = "gan.py", line = 30, rule = "AGF009", status = "real", why = "loss.data[0]" },
  { file = "nb.ipynb", cell = 4, line = 2, rule = "AGF001", status = "latent", why = "cell forward" },
]
not_sites = [ { file = "gan.py", line = 40, rule = "AGF009", why = "p.grad.data" } ]
optional = [ { file = "*.ipynb", rule = "AGF012", why = "alias calls" } ]
judged = [ { file = "train.py", line = 5, rule = "AGF001", verdict = "true", why = "smoke forward" } ]
"""


def test_findings_match_sites_by_span_cell_and_rule(measure, tmp_path):
    sites = tmp_path / "sites.toml"
    sites.write_text(SITES)
    F = measure.Finding
    findings = [
        F("gan.py", None, 10, "AGF001", "def line inside the span"),
        F("gan.py", None, 31, "AGF009", "one line off: not the site"),
        F("nb.ipynb", 3, 2, "AGF001", "wrong cell"),
        F("nb.ipynb", 1, 7, "AGF012", "optional place"),
        F("gan.py", None, 40, "AGF009", "a candidate judged no bug"),
        F("train.py", None, 5, "AGF001", "judged true after the run"),
    ]
    tallies = measure.measure(sites, findings)
    assert (tallies["AGF001"].real, tallies["AGF001"].found_real) == (1, 1)
    assert (tallies["AGF001"].latent, tallies["AGF001"].found_latent) == (1, 0)
    assert tallies["AGF001"].false == 1 and tallies["AGF001"].unjudged == 1  # the wrong cell
    assert tallies["AGF001"].extra_true == 1
    assert (tallies["AGF009"].real, tallies["AGF009"].found_real) == (1, 0)
    assert tallies["AGF009"].false == 2 and tallies["AGF009"].unjudged == 1  # line 31 unjudged, line 40 a not-site
    assert "AGF012" not in tallies


def test_a_finding_that_decorates_the_function_around_a_site_finds_it(measure, tmp_path):
    # `@torch.no_grad()` on `test` is reported at its `def` line (5), its range ending at
    # 14: the site at the forward (line 9) is fixed by it; a not-site inside the same
    # range does not turn the finding false, and a finding ending before the site misses it
    sites = tmp_path / "sites.toml"
    sites.write_text(
        'sites = [ { file = "a2c.py", line = 9, rule = "AGF001", status = "real", why = "test()" } ]\n'
        'not_sites = [ { file = "a2c.py", line = 11, rule = "AGF001", why = "elsewhere" } ]\n'
    )
    F = measure.Finding
    decorated = measure.measure(sites, [F("a2c.py", None, 5, "AGF001", "`test` runs the model", 14)])
    assert (decorated["AGF001"].found_real, decorated["AGF001"].false) == (1, 0)
    short = measure.measure(sites, [F("a2c.py", None, 5, "AGF001", "a statement before it", 8)])
    assert (short["AGF001"].found_real, short["AGF001"].false) == (0, 1)
    other_rule = measure.measure(sites, [F("a2c.py", None, 5, "AGF009", "another rule", 14)])
    assert other_rule["AGF001"].found_real == 0


def test_a_cell_that_does_not_parse_leaves_the_other_cells_searched(measure, tmp_path):
    import candidates

    cell = lambda source: {"cell_type": "code", "source": textwrap.dedent(source), "metadata": {}, "outputs": []}  # noqa: E731
    notebook = {"cells": [
        {"cell_type": "markdown", "source": "# exercise", "metadata": {}},
        cell("lr = \n"),
        cell("""\
            for x, y in loader:
                out = model(x)
                loss = criterion(out, y)
                loss.backward()
                optimizer.step()
        """),
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "course.ipynb"
    path.write_text(json.dumps(notebook))
    program = candidates.program(path)
    assert "lr =" not in program.text and "loss.backward()" in program.text
    line = program.text.splitlines().index("    loss.backward()") + 1
    assert candidates.where(path, tmp_path, program, line) == "course.ipynb:cell 3:4"
