"""Issue 18, F5: a teacher-forcing training branch (`elif use_teacher_forcing:`) whose loss
is overwritten before the backward was taken for an evaluation pass and given a *safe*
fix. The branch's forwards sit in a function that backpropagates the same name, so
gradient use is reachable: AGF001 must stay silent there or propose only an unsafe fix
(verification decides), never a safe one."""

from __future__ import annotations

import textwrap

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.model import Applicability
from autograd_fix.codemods.registry import rule_by_code

SEQ2SEQ_TRAIN = """
import random
import torch
import torch.nn.functional as F

teacher_forcing_ratio = 0.5


def train(input_batches, input_lengths, target_batches, target_lengths, encoder, decoder,
          encoder_optimizer, decoder_optimizer, criterion, target_variable, target_length, use_targets):
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    loss = 0
    encoder_outputs, encoder_hidden = encoder(input_batches, input_lengths, None)
    decoder_input = torch.zeros(1, 4).long()
    decoder_context = encoder_outputs[-1]
    decoder_hidden = encoder_hidden
    all_decoder_outputs = torch.zeros(max(target_lengths), 4, decoder.output_size)
    use_teacher_forcing = random.random() < teacher_forcing_ratio
    if use_targets:
        for t in range(max(target_lengths)):
            decoder_output, decoder_context, decoder_hidden, _ = decoder(
                decoder_input, decoder_context, decoder_hidden, encoder_outputs
            )
            all_decoder_outputs[t] = decoder_output
            decoder_input = target_batches[t]
    elif use_teacher_forcing:
        for di in range(target_length):
            decoder_output, decoder_context, decoder_hidden, _ = decoder(
                decoder_input, decoder_context, decoder_hidden, encoder_outputs
            )
            loss += criterion(decoder_output[0], target_variable[di])
            decoder_input = target_variable[di]
    else:
        for di in range(target_length):
            decoder_output, decoder_context, decoder_hidden, _ = decoder(
                decoder_input, decoder_context, decoder_hidden, encoder_outputs
            )
            loss += criterion(decoder_output[0], target_variable[di])
            topv, topi = decoder_output.topk(1)
            decoder_input = topi[0][0].view(1, 1)
    loss = F.cross_entropy(all_decoder_outputs.transpose(0, 1).flatten(0, 1), target_batches.flatten())
    loss.backward()
    encoder_optimizer.step()
    decoder_optimizer.step()
    return loss.item()
"""


def test_teacher_forcing_branch_of_a_training_function_gets_no_safe_fix() -> None:
    result = check_source(
        textwrap.dedent(SEQ2SEQ_TRAIN).lstrip(), [rule_by_code("AGF001")], path="train.py",
        options=FixOptions(unsafe_fixes=True), compute_fix=False,
    )
    assert all(f.fix is None or f.fix.applicability is Applicability.UNSAFE for f in result.findings)
    assert not any(f.fix is not None and f.fix.applicability is Applicability.SAFE for f in result.findings)
