"""AGF011 beyond the inline examples: the rewritten example gives the same gradients."""

from __future__ import annotations

import textwrap

import torch

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.rules.agf011_unneeded_retain_graph import UnneededRetainGraph

UNSAFE = FixOptions(unsafe_fixes=True)


def _trained_parameters(source: str) -> list[torch.Tensor]:
    namespace: dict = {"__name__": "not_main"}
    exec(compile(source, "example.py", "exec"), namespace)
    torch.manual_seed(0)
    model = namespace["TwoHeads"]()
    loader = [(torch.randn(32, 10), torch.randn(32, 1)) for _ in range(5)]
    namespace["train"](model, loader)
    return [p.grad.clone() for p in model.parameters()] + [p.detach().clone() for p in model.parameters()]


def test_example_script_gradients_and_parameters_unchanged(repo_root) -> None:
    source = (repo_root / "examples" / "unneeded_retain_graph.py").read_text()
    fixed = check_source(source, [UnneededRetainGraph], options=UNSAFE).fixed
    assert fixed is not None and "(main_loss + aux_loss).backward()" in fixed
    for before, after in zip(_trained_parameters(source), _trained_parameters(fixed)):
        torch.testing.assert_close(before, after)


def test_removed_retain_graph_really_was_unneeded() -> None:
    source = textwrap.dedent(
        """
        import torch
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        data_loader = [torch.randn(5, 4) for _ in range(3)]
        for x in data_loader:
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward(retain_graph=True)
            opt.step()
        """
    ).lstrip()
    fixed = check_source(source, [UnneededRetainGraph], options=UNSAFE).fixed
    assert fixed is not None and "retain_graph" not in fixed
    exec(compile(fixed, "fixed.py", "exec"), {})


def test_aliased_torch_and_second_backward_elsewhere_stays_silent() -> None:
    source = textwrap.dedent(
        """
        import torch as T
        for x, y in loader:
            loss = crit(model(x), y)
            loss.backward(retain_graph=True)
            T.autograd.grad(loss, list(model.parameters()))
        """
    ).lstrip()
    assert check_source(source, [UnneededRetainGraph], options=UNSAFE).findings == []


TWICE = textwrap.dedent(
    """
    import torch

    def accumulate_twice(model, batch):
        inputs, targets = batch
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        loss.backward(retain_graph=True)
        {SECOND}
    """
).lstrip()


def test_the_last_of_two_backwards_drops_retain_graph_with_the_same_gradients() -> None:
    source = TWICE.replace("{SECOND}", "loss.backward(retain_graph=True)")
    fixed = check_source(source, [UnneededRetainGraph], options=UNSAFE).fixed
    assert fixed == TWICE.replace("{SECOND}", "loss.backward()")
    grads = []
    for text in (source, fixed):
        namespace: dict = {}
        exec(compile(text, "example.py", "exec"), namespace)
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        namespace["accumulate_twice"](model, (torch.randn(4, 3), torch.randn(4, 1)))
        grads.append([p.grad.clone() for p in model.parameters()])
    for before, after in zip(*grads):
        torch.testing.assert_close(before, after)


def test_an_autograd_grad_before_the_repeated_backward_keeps_it_silent() -> None:
    source = TWICE.replace(
        "{SECOND}",
        "torch.autograd.grad(loss, list(model.parameters()), retain_graph=True)\n    loss.backward(retain_graph=True)",
    )
    assert check_source(source, [UnneededRetainGraph], options=UNSAFE).findings == []


def test_a_helper_given_the_loss_after_the_last_backward_keeps_it_silent() -> None:
    source = TWICE.replace("{SECOND}", "loss.backward(retain_graph=True)\n    stats = penalise(loss)")
    assert check_source(source, [UnneededRetainGraph], options=UNSAFE).findings == []
