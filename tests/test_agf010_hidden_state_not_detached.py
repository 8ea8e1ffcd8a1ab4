"""AGF010 hidden-state-not-detached: CRLF, fix applicability by state shape, a real run of the example script."""

from __future__ import annotations

import pytest



from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.registry import rule_by_code

AGF010 = rule_by_code("AGF010")


def test_crlf_source_keeps_crlf() -> None:
    source = "import torch\r\nh = torch.zeros(2, 3)\r\nfor x in data:\r\n    h = cell(x, h)\r\n    h.sum().backward()\r\n"
    result = check_source(source, [AGF010], options=FixOptions())
    assert result.fixed == (
        "import torch\r\nh = torch.zeros(2, 3)\r\nfor x in data:\r\n    h = h.detach()\r\n"
        "    h = cell(x, h)\r\n    h.sum().backward()\r\n"
    )


def test_unknown_state_shape_fix_is_unsafe_and_known_shape_is_safe() -> None:
    unknown = "hidden = model.init_hidden(4)\nfor x in data:\n    out, hidden = model(x, hidden)\n    out.sum().backward()\n"
    known = "import torch\nhidden = torch.zeros(1, 4, 8)\nfor x in data:\n    out, hidden = model(x, hidden)\n    out.sum().backward()\n"
    assert check_source(unknown, [AGF010]).findings[0].fix.applicability.value == "unsafe"
    assert check_source(known, [AGF010]).findings[0].fix.applicability.value == "safe"


_TAGGER = '''
import torch
import torch.nn as nn


class PosTagger(nn.Module):
    def __init__(self, vocab=30, width=12, tags=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.lstm = nn.LSTM(width, width, batch_first=True)
        self.out = nn.Linear(width, tags)
        self.hidden = self.init_hidden()

    def init_hidden(self, batch=2):
        return (torch.zeros(1, batch, self.lstm.hidden_size), torch.zeros(1, batch, self.lstm.hidden_size))

    def forward(self, words):
        states, self.hidden = self.lstm(self.embed(words), self.hidden)
        return self.out(states)


def train_epoch(tagger, sentences, optimizer):
    for words, tags in sentences:
%(reset)s        scores = tagger(words)
        loss = nn.functional.cross_entropy(scores.flatten(0, 1), tags.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


torch.manual_seed(0)
tagger = PosTagger()
sentences = [(torch.randint(0, 30, (2, 6)), torch.randint(0, 5, (2, 6))) for _ in range(3)]
train_epoch(tagger, sentences, torch.optim.SGD(tagger.parameters(), lr=0.1))
'''


@pytest.mark.torch
def test_state_kept_on_self_with_the_loop_in_a_caller_is_detached_in_forward() -> None:
    """pytorch/pytorch#2769's shape: the original fails on the second batch, the fix runs."""
    source = _TAGGER % {"reset": ""}
    try:
        exec(compile(source, "tagger.py", "exec"), {"__name__": "__main__"})
    except RuntimeError as error:
        assert "second time" in str(error)
    else:
        raise AssertionError("the original should fail on the second batch")
    result = check_source(source, [AGF010], options=FixOptions(unsafe_fixes=True))
    assert [f.span.line for f in result.findings] == [18]
    assert result.findings[0].fix.applicability.value == "unsafe"
    assert "self.hidden = self.hidden.detach() if isinstance(self.hidden, torch.Tensor)" in result.fixed
    exec(compile(result.fixed, "tagger.py", "exec"), {"__name__": "__main__"})


def test_state_kept_on_self_but_reinitialised_every_batch_is_silent() -> None:
    source = _TAGGER % {"reset": "        tagger.hidden = tagger.init_hidden(words.size(0))\n"}
    assert check_source(source, [AGF010]).findings == []
