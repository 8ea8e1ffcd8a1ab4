"""AGF009 on the `.data` reads `benchmarks/recall_real` found missed or falsely reported on
code nobody here wrote (issue 18), in reduced, real-looking forms: each test can fail."""

from __future__ import annotations

import textwrap

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.registry import rule_by_code

AGF009 = rule_by_code("AGF009")

VAE = """
import torch
import torch.nn as nn
from torchvision.utils import save_image


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        return h, h.mean(1), h.std(1)


vae = VAE()
optimizer = torch.optim.Adam(vae.parameters(), lr=1e-3)
for idx in range(10):
    images = torch.randn(2, 4)
    recon_images, mu, logvar = vae(images)
    loss = recon_images.sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def _lines(source: str) -> list[int]:
    result = check_source(textwrap.dedent(source).lstrip(), [AGF009], path="train.py", options=FixOptions(), compute_fix=False)
    return [f.span.line for f in result.findings]


def _line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(textwrap.dedent(source).lstrip().splitlines(), 1) if text in line)


def test_outputs_unpacked_from_a_forward_are_tracked() -> None:
    source = VAE + """
recon_x, _, _ = vae(torch.randn(1, 4))
save_image(recon_x.view(recon_x.size(0), 1, 2, 2).data.cpu(), "recon.png")
"""
    assert _lines(source) == [_line_of(source, "save_image(recon_x")]


def test_a_helper_returning_a_forward_output_gives_a_tracked_value() -> None:
    source = VAE + """

def compare(x):
    recon_x, _, _ = vae(x)
    return torch.cat([x, recon_x])


compare_x = compare(torch.randn(1, 4))
save_image(compare_x.data.cpu(), "sample.png")
"""
    assert _lines(source) == [_line_of(source, "compare_x.data")]


def test_values_of_max_are_tracked_and_its_indices_are_not() -> None:
    source = """
import torch
import torch.nn as nn
from torch.autograd import Variable

model = nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())


def compute_td_loss(state, next_state, action, reward, done, gamma=0.99):
    q_value = model(state).gather(1, action.unsqueeze(1)).squeeze(1)
    next_q_values = model(next_state)
    next_q_value = next_q_values.max(1)[0]
    best_action = next_q_values.max(1)[1]
    _, greedy = next_q_values.max(1)
    expected_q_value = reward + gamma * next_q_value * (1 - done)
    loss = (q_value - Variable(expected_q_value.data)).pow(2).mean()
    print(best_action.data, greedy.data)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss
"""
    assert _lines(source) == [_line_of(source, "expected_q_value.data")]


def test_lengths_of_a_packed_sequence_are_integers() -> None:
    source = """
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence


class RNNClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(128, 8)
        self.gru = nn.GRU(8, 8)

    def forward(self, input, seq_lengths):
        embedded = self.embedding(input.t())
        gru_input = pack_padded_sequence(embedded, seq_lengths.data.cpu().numpy())
        output, hidden = self.gru(gru_input)
        return hidden.data
"""
    assert _lines(source) == [_line_of(source, "return hidden.data")]
