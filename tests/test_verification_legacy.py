"""Scripts written for PyTorch before 0.4 (`loss.data[0]`): verified as written.

Modelled on the 2017-era tutorials that verification met on code nobody here wrote
(L1aoXingyu/pytorch-beginner, hunkim/PyTorchZeroToAll, spro/practical-pytorch): every
logging line indexes a 0-dim loss, which PyTorch 0.5 and later refuse, so both runs
stopped there and no patch of such a file could be judged.
"""

from __future__ import annotations

import textwrap

import torch

from autograd_fix.verification.api import verify_pair
from autograd_fix.verification.legacy import stopped_at_zero_dim_index, zero_dim_index_as_item
from autograd_fix.verification.protocol import ExceptionRecord, RunRecord

NGRAM = textwrap.dedent(
    """\
    import torch
    from torch import nn
    from torch.autograd import Variable

    torch.manual_seed(0)
    words = torch.randint(0, 20, (40,))
    model = nn.Sequential(nn.Embedding(20, 8), nn.Flatten(0), nn.Linear(16, 20))
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    for epoch in range(2):
        running_loss = 0
        for i in range(len(words) - 2):
            context = Variable(words[i:i + 2])
            target = Variable(words[i + 2:i + 3])
            out = model(context).unsqueeze(0)
            loss = criterion(out, target)
            running_loss += loss.data[0]
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print("epoch", epoch, "loss", running_loss / len(words))
    """
)


def _verify(verifier, tmp_path, original: str, rewritten: str, rule: str):
    assert original != rewritten
    return verify_pair(original, rewritten, path=str(tmp_path / "ngram.py"), rule=rule, verifier=verifier)


def test_the_reading_gives_the_number_and_keeps_a_graph_where_one_is_needed() -> None:
    loss = torch.tensor(2.5)
    with zero_dim_index_as_item("never.py", None) as used:
        assert loss[0] == 2.5 and isinstance(loss[0], float)
        weight = torch.tensor(3.0, requires_grad=True)
        assert weight[-1] is weight
        assert torch.arange(3)[0] == 0  # a real index is a real index
    assert used[0] == 3  # two reads of loss[0], one of weight[-1]
    try:
        loss[0]
    except IndexError as error:
        assert stopped_at_zero_dim_index(RunRecord(exception=ExceptionRecord(type="IndexError", message=str(error))))
    else:  # pragma: no cover - the reading outlived its block
        raise AssertionError("0-dim indexing still read as .item() after the block")


def test_a_pre_04_script_is_verified_with_its_own_reading_of_loss_data_0(tmp_path, verifier) -> None:
    fixed = NGRAM.replace("running_loss += loss.data[0]", "running_loss += loss.item()")
    verdict = _verify(verifier, tmp_path, NGRAM, fixed, "AGF009")
    assert verdict.verdict == "accepted", verdict.reason
    assert "read as `x.item()`" in verdict.reason


def test_a_rewrite_that_keeps_the_0_dim_index_on_its_own_line_is_rejected(tmp_path, verifier) -> None:
    wrong = NGRAM.replace("running_loss += loss.data[0]", "running_loss += loss.detach()[0]")
    verdict = _verify(verifier, tmp_path, NGRAM, wrong, "AGF009")
    assert verdict.verdict == "rejected", verdict.reason
    assert "invalid index of a 0-dim tensor" in verdict.reason


def test_other_patches_of_such_a_script_are_compared_too(tmp_path, verifier) -> None:
    fixed = NGRAM.replace("Variable(words[i:i + 2])", "words[i:i + 2]").replace("Variable(words[i + 2:i + 3])", "words[i + 2:i + 3]")
    verdict = _verify(verifier, tmp_path, NGRAM, fixed, "AGF012")
    assert verdict.verdict == "accepted", verdict.reason
