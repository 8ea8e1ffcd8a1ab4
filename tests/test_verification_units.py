"""Unit discovery (pure ast, no worker), the factory config, input binding failures,
the `verify` subcommand, gradcheck of a file, and CUDA (skipped without a GPU)."""

from __future__ import annotations

import json
import textwrap

import pytest
from typer.testing import CliRunner

from autograd_fix.cli.verify_command import verify_app
from autograd_fix.verification import (
    ConfigError,
    UnitError,
    Verdict,
    Verifier,
    find_units,
    gradcheck_file,
    load_config,
    verify_pair,
)
from autograd_fix.verification.verdict import UnitResult, combine, format_bytes

SRC = textwrap.dedent(
    """
    import torch
    from torch import nn

    LR = 0.1
    SCALE = LR * 2
    model = nn.Linear(3, 1)  # top-level side effect: must not run in function mode


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(x)


    def step(model, optimizer):
        optimizer.step()
        return SCALE


    def evaluate(model, loader):
        return [model(x) for x, _ in loader]


    if __name__ == "__main__":
        evaluate(Net(), [])
    """
)




# -- units ----------------------------------------------------------------------------------
def test_changed_function_in_a_script_runs_through_the_script_first():
    changed = SRC.replace("return [model(x) for x, _ in loader]", "with torch.no_grad():\n        return [model(x) for x, _ in loader]")
    (unit,) = find_units(SRC, changed)
    assert unit.name == "__main__" and unit.mode == "script" and unit.driver == "script driver (__main__)"
    assert unit.targets == ("evaluate",) and not unit.script_changed
    (fallback,) = unit.fallbacks
    assert fallback.name == "evaluate" and fallback.kind == "function"
    assert fallback.original == SRC  # the real module: every statement, the file's own line numbers


def test_function_fallback_binds_only_names_the_import_does_not_define():
    changed = SRC.replace("return SCALE", "return SCALE + 0")
    (fallback,) = find_units(SRC, changed)[0].fallbacks
    assert fallback.name == "step" and fallback.free_names == ()  # SCALE exists once imported
    src = "import torch\n\ndef train():\n    model(x)\n\nif __name__ == '__main__':\n    model = torch.nn.Linear(2, 2)\n"
    (fallback,) = find_units(src, src.replace("model(x)", "model(x).sum()"))[0].fallbacks
    assert set(fallback.free_names) == {"model", "x"}  # `model` is only set under __main__


def test_changed_method_and_main_block():
    changed = SRC.replace("return self.fc(x)", "return self.fc(x).relu()").replace("evaluate(Net(), [])", "evaluate(Net(), [()])")
    (unit,) = find_units(SRC, changed)
    assert unit.mode == "script" and unit.script_changed
    assert [f.name for f in unit.fallbacks] == ["Net.forward"] and unit.fallbacks[0].kind == "method"


def test_entry_names_the_unit_and_bad_entries_raise():
    assert find_units(SRC, SRC, entry="__main__")[0].mode == "script"
    assert find_units(SRC, SRC, entry="Net.forward")[0].kind == "method"
    with pytest.raises(UnitError):
        find_units(SRC, SRC, entry="nope")
    with pytest.raises(UnitError):
        find_units(SRC, "def broken(:\n")


def test_free_names_are_reported_for_binding():
    src = "import torch\n\ndef train():\n    for x, y in loader:\n        model(x).sum().backward()\n"
    changed = src.replace(".sum()", ".mean()")
    (unit,) = find_units(src, changed)
    assert set(unit.free_names) == {"loader", "model"}


def test_formatting_only_change_has_no_units():
    assert find_units(SRC, SRC.replace("LR = 0.1", "LR = 0.1  # learning rate")) == []


# -- verdict helpers ----------------------------------------------------------------------------
def test_combine_and_json_shape():
    units = [UnitResult("a", "function", "accepted", "ok", {}), UnitResult("b", "script", "unverified", "why", {})]
    verdict = combine(units, "AGF001")
    assert verdict.verdict == "unverified" and verdict.reason == "b: why"
    data = verdict.to_json()
    assert set(data) == {"verdict", "reason", "rule", "driver", "isolated", "isolation_gap", "units"}
    assert data["isolated"] is True and data["isolation_gap"] is None
    assert set(data["units"][0]) == {"name", "mode", "verdict", "reason", "driver", "evidence"}
    assert Verdict("accepted", "outputs equal", None).summary() == "accepted: outputs equal"
    unconfined = Verdict("accepted", "outputs equal", None, isolation_gap='isolation = "off"')
    assert unconfined.summary() == 'accepted: outputs equal [runs NOT isolated: isolation = "off"]'
    assert unconfined.to_json()["isolated"] is False
    assert format_bytes(17_100_000) == "17.1 MB" and format_bytes(0) == "0 B"


# -- factories ----------------------------------------------------------------------------------
FACTORY_UNIT = textwrap.dedent(
    """
    import torch


    class Encoder(torch.nn.Module):
        def __init__(self, vocab, width):
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, width)

        def forward(self, tokens):
            return self.emb(tokens).mean(dim=1)


    def encode_all(encoder, corpus):
        out = []
        for tokens in corpus:
            out.append(encoder(tokens))
        return torch.stack(out)
    """
)


def test_user_factories_from_pyproject(tmp_path, verifier):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.autograd-fix.verify]\nencoder = "agf_factories:make_encoder"\ncorpus = "agf_factories:make_corpus"\n'
    )
    (tmp_path / "agf_factories.py").write_text(
        "import torch\nfrom mymodel import Encoder\n" if False else textwrap.dedent(
            """
            import sys
            import torch


            def make_encoder():
                encoder_cls = sys.modules["__autograd_fix_unit__"].Encoder
                return encoder_cls(vocab=20, width=5)


            def make_corpus(encoder):
                vocab = encoder.emb.num_embeddings
                return [torch.randint(0, vocab, (2, 7)) for _ in range(3)]
            """
        )
    )
    target = tmp_path / "encode.py"
    target.write_text(FACTORY_UNIT)
    config = load_config(str(target))
    assert config.factories == {"encoder": "agf_factories:make_encoder", "corpus": "agf_factories:make_corpus"}
    fixed = FACTORY_UNIT.replace(
        "    for tokens in corpus:\n        out.append(encoder(tokens))",
        "    with torch.no_grad():\n        for tokens in corpus:\n            out.append(encoder(tokens))",
    )
    verdict = verify_pair(FACTORY_UNIT, fixed, path=str(target), checks=("outputs_equal", "retained_graph_lower_if_any"), verifier=verifier)
    assert verdict.verdict == "accepted", verdict.reason
    assert verdict.units[0].evidence["original"]["bound"]["encoder"] == "factory agf_factories:make_encoder"


def test_without_factories_the_unbindable_name_is_reported(tmp_path, verifier):
    src = "import torch\n\ndef f(frobnicator):\n    return frobnicator + 1\n"
    verdict = verify_pair(src, src.replace("+ 1", "+ 2"), path=str(tmp_path / "f.py"), verifier=verifier)
    assert verdict.verdict == "unverified"
    assert "'frobnicator'" in verdict.reason and "[tool.autograd-fix.verify]" in verdict.reason


def test_malformed_factory_table_is_a_config_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.autograd-fix.verify]\nmodel = "no_colon_here"\n')
    with pytest.raises(ConfigError):
        load_config(str(tmp_path / "x.py"))


# -- gradcheck of a file --------------------------------------------------------------------------
GRADCHECK_FILE = textwrap.dedent(
    """
    import torch


    class GoodSquare(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale=1.0):
            ctx.save_for_backward(x)
            ctx.scale = scale
            return x * x * scale

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad * ctx.scale, None


    class BadSquare(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return x * grad  # missing factor 2: right arity, wrong formula

    raise SystemExit("top-level code must not run under --gradcheck")
    """
)


def test_gradcheck_file_reports_each_function(verifier):
    reports = {r["name"]: r for r in gradcheck_file(GRADCHECK_FILE.replace('raise SystemExit("top-level code must not run under --gradcheck")', ""), path="g.py", verifier=verifier)}
    assert reports["GoodSquare"]["passed"] is True
    assert reports["BadSquare"]["passed"] is False and "Jacobian mismatch" in reports["BadSquare"]["error"]


# -- CLI --------------------------------------------------------------------------------------------
EVAL = textwrap.dedent(
    """
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
    batches = [torch.randn(5, 6) for _ in range(3)]
    scores = []
    for batch in batches:
        scores.append(model(batch))
    """
)
EVAL_FIXED = EVAL.replace("for batch in batches:\n    scores.append(model(batch))", "with torch.no_grad():\n    for batch in batches:\n        scores.append(model(batch))")


@pytest.fixture()
def files(tmp_path):
    def write(name: str, text: str) -> str:
        path = tmp_path / name
        path.write_text(text)
        return str(path)

    return write


def test_cli_accepted_text(files, verifier):
    result = CliRunner().invoke(verify_app, [files("a.py", EVAL), files("b.py", EVAL_FIXED), "--rule", "AGF001"], obj=verifier)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("accepted:")
    assert "retained graph" in result.output


def test_cli_rejected_json(files, verifier):
    changed = EVAL.replace("nn.Tanh()", "nn.ReLU()")
    result = CliRunner().invoke(verify_app, [files("a.py", EVAL), files("b.py", changed), "--format", "json", "--device", "cpu"], obj=verifier)
    assert result.exit_code == 1, result.output
    data = json.loads(result.output)
    assert data["verdict"] == "rejected" and data["rule"] is None
    unit = data["units"][0]
    assert unit["mode"] == "script" and unit["evidence"]["original"]["device"] == "cpu"
    assert {"retained_graph_bytes", "peak_bytes"} <= set(unit["evidence"]["original"]["measured"])


def test_cli_unverified_exit_3(files):
    src = "import torch\n\ndef f(frobnicator):\n    return frobnicator\n"
    result = CliRunner().invoke(verify_app, [files("a.py", src), files("b.py", src.replace("return frobnicator", "return frobnicator * 1"))])  # standalone: starts its own worker
    assert result.exit_code == 3, result.output


def test_cli_usage_errors_exit_2(files):
    runner = CliRunner()
    a = files("a.py", EVAL)
    assert runner.invoke(verify_app, [a]).exit_code == 2
    assert runner.invoke(verify_app, [a, a, "--rule", "AGF999"]).exit_code == 2
    assert runner.invoke(verify_app, [a, a, "--entry", "missing"]).exit_code == 2
    assert runner.invoke(verify_app, [a, a, "--device", "tpu"]).exit_code == 2
    assert runner.invoke(verify_app, [a, a + ".nope"]).exit_code == 2


def test_cli_gradcheck(files, verifier):
    path = files("g.py", GRADCHECK_FILE)
    result = CliRunner().invoke(verify_app, [path, "--gradcheck"], obj=verifier)
    assert result.exit_code == 1, result.output  # BadSquare fails
    assert "GoodSquare: passed" in result.output and "BadSquare: failed" in result.output


# -- CUDA ---------------------------------------------------------------------------------------------
def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.cuda
@pytest.mark.skipif(not _cuda(), reason="needs a CUDA device")
@pytest.mark.xfail(reason="verification runs cannot initialise CUDA (error 304) on the H200 machine; see tests/test_cuda.py", strict=False)
def test_cuda_eval_fix_measures_cuda_memory(verifier):
    src = textwrap.dedent(
        """
        import torch
        from torch import nn


        def evaluate(model, loader, device):
            model.to(device)
            outs = []
            for x, y in loader:
                outs.append(model(x.to(device)))
            return torch.cat(outs)
        """
    )
    fixed = src.replace("    for x, y in loader:\n        outs", "    with torch.no_grad():\n      for x, y in loader:\n        outs")
    verdict = verify_pair(src, fixed, device="cuda", checks=("outputs_equal", "retained_graph_lower_if_any", "peak_memory_not_higher"), verifier=verifier)
    assert verdict.verdict == "accepted", verdict.reason
    measured = verdict.units[0].evidence["original"]["measured"]
    assert measured["peak_measure"] == "cuda max_memory_allocated" and measured["peak_bytes"] > 0


def test_probes_track_graph_bytes_held_during_the_run_without_the_gc():
    import gc

    import torch

    from autograd_fix.verification.probes import Probes

    layer = torch.nn.Linear(8, 16)

    def evaluate(no_grad: bool) -> float:
        kept = []
        for _ in range(4):
            x = torch.randn(5, 8)
            if no_grad:
                with torch.no_grad():
                    kept.append(layer(x).relu())
            else:
                kept.append(layer(x).relu())
        return torch.cat(kept).sum().item()  # `kept` (and its graphs) freed on return

    gc.disable()  # freeing must not depend on the cyclic collector
    try:
        measured = {}
        for no_grad in (False, True):
            probes = Probes()
            probes.install()
            evaluate(no_grad)
            live = probes._graph_bytes.live
            measured[no_grad] = probes.finish([])
            assert live == 0, "saved tensors freed with their graph must leave the live count"
    finally:
        gc.enable()
    # per batch: the input x (5*8 floats; the weight and its .t() view are excluded) and
    # the relu result (5*16 floats); nothing at the end
    assert measured[False]["peak_graph_bytes"] == 4 * (5 * 8 + 5 * 16) * 4
    assert measured[False]["retained_graph_bytes"] == 0
    assert measured[True]["peak_graph_bytes"] == 0


def test_graph_inputs_of_a_function_come_from_the_files_own_layers():
    from autograd_fix.verification.units import _Module, graph_inputs

    source = '''
import torch
from torch import nn


class RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bits):
        return torch.round(x * bits) / bits

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


class Quant(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))
        self.bits = 4

    def forward(self, x):
        return RoundSTE.apply(torch.relu(x), self.bits) * self.scale, RoundSTE.apply(self.scale, 8)
'''
    found = dict(graph_inputs(_Module(source, "q.py"), "RoundSTE"))
    assert set(found) == {0}  # an int and a literal never carry a graph
    assert found[0].startswith(("`torch.relu(x)` in Quant.forward", "`self.scale` in Quant.forward"))


@pytest.mark.parametrize(
    ("layer", "counted"),
    [
        ("class Quant(nn.Sequential):", True),  # a torch.nn module class: a module (was missed)
        ("class Quant(BaseModule):", True),  # a base from elsewhere, and a `forward` of its own
        ("class Quant(Mixin, torch.nn.Module):", True),
        ("class Quant(object):", False),  # certainly no module, whatever its methods say
    ],
)
def test_graph_inputs_ask_the_rules_answer_to_is_this_class_a_module(layer: str, counted: bool):
    """`graph_inputs` reads the same class answer as the rules (`module_bases`), not a
    base name that ends in `Module`."""
    from autograd_fix.verification.units import _Module, graph_inputs

    source = f'''
import torch
from torch import nn
from mmcv.runner import BaseModule
from mixins import Mixin


class RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


{layer}
    def forward(self, x):
        return RoundSTE.apply(torch.relu(x))
'''
    assert bool(graph_inputs(_Module(source, "q.py"), "RoundSTE")) is counted


def test_units_read_the_class_answer_without_libcst():
    """The verifier asks the rules' class answer through libcst-free modules only."""
    import subprocess
    import sys

    code = (
        "import sys; import autograd_fix.verification.units; "
        "print(sorted(m for m in sys.modules if m == 'libcst' or m.startswith('autograd_fix.codemods.')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "libcst" not in result.stdout
    assert "autograd_fix.codemods.semantic.nn_modules" not in result.stdout
