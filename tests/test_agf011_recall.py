"""AGF011 on the class `benchmarks/recall_real` found missed on code nobody here wrote
(issue 18): an infoGAN-style training method whose discriminator loss is backpropagated
with `retain_graph=True` although the generator step recomputes every value it uses."""

from __future__ import annotations

import textwrap

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.registry import rule_by_code

INFOGAN = """
import numpy as np
import torch
import torch.nn as nn


class infoGAN(object):
    def __init__(self, G, D, loader, batch_size, gpu_mode=False):
        self.G, self.D = G, D
        self.data_loader = loader
        self.batch_size = batch_size
        self.gpu_mode = gpu_mode
        self.BCE_loss = nn.BCELoss()
        self.MSE_loss = nn.MSELoss()
        self.G_optimizer = torch.optim.Adam(G.parameters())
        self.D_optimizer = torch.optim.Adam(D.parameters())
        self.info_optimizer = torch.optim.Adam(list(G.parameters()) + list(D.parameters()))

    def train(self, supervised):
        self.y_real_, self.y_fake_ = torch.ones(self.batch_size, 1), torch.zeros(self.batch_size, 1)
        if self.gpu_mode:
            self.y_real_, self.y_fake_ = self.y_real_.cuda(), self.y_fake_.cuda()
        for x_, y_ in self.data_loader:
            z_ = torch.rand((self.batch_size, 62))
            if supervised:
                y_disc_ = torch.zeros((self.batch_size, 10)).scatter_(1, y_.type(torch.LongTensor).unsqueeze(1), 1)
            else:
                y_disc_ = torch.from_numpy(np.random.multinomial(1, 10 * [0.1], size=[self.batch_size])).type(torch.FloatTensor)
            y_cont_ = torch.from_numpy(np.random.uniform(-1, 1, size=(self.batch_size, 2))).type(torch.FloatTensor)
            if self.gpu_mode:
                x_, z_, y_disc_, y_cont_ = x_.cuda(), z_.cuda(), y_disc_.cuda(), y_cont_.cuda()

            self.D_optimizer.zero_grad()
            D_real, _, _ = self.D(x_)
            D_real_loss = self.BCE_loss(D_real, self.y_real_)
            G_ = self.G(z_, y_cont_, y_disc_)
            D_fake, _, _ = self.D(G_)
            D_fake_loss = self.BCE_loss(D_fake, self.y_fake_)
            D_loss = D_real_loss + D_fake_loss
            D_loss.backward(retain_graph=True)
            self.D_optimizer.step()

            self.G_optimizer.zero_grad()
            G_ = self.G(z_, y_cont_, y_disc_)
            D_fake, D_cont, D_disc = self.D(G_)
            G_loss = self.BCE_loss(D_fake, self.y_real_)
            G_loss.backward(retain_graph=True)
            self.G_optimizer.step()

            cont_loss = self.MSE_loss(D_cont, y_cont_)
            info_loss = cont_loss
            info_loss.backward()
            self.info_optimizer.step()
"""


def _lines(source: str) -> list[int]:
    result = check_source(textwrap.dedent(source).lstrip(), [rule_by_code("AGF011")], path="gan.py",
                          options=FixOptions(unsafe_fixes=True), compute_fix=False)
    return [f.span.line for f in result.findings]


def _line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(textwrap.dedent(source).lstrip().splitlines(), 1) if text in line)


def test_discriminator_retain_graph_with_every_later_value_recomputed() -> None:
    # the generator's retain_graph=True is needed: info_loss reads D_cont of the same graph
    assert _lines(INFOGAN) == [_line_of(INFOGAN, "D_loss.backward(retain_graph=True)")]


def test_a_later_backward_through_the_retained_graph_keeps_it() -> None:
    reused = INFOGAN.replace("            G_ = self.G(z_, y_cont_, y_disc_)\n            D_fake, D_cont", "            D_fake, D_cont", 1)
    assert reused != INFOGAN
    assert _lines(reused) == []  # G_ (and its graph) comes from before D_loss.backward


def test_labels_rebuilt_in_the_loop_by_another_method_are_not_constants() -> None:
    changed = INFOGAN + """
    def relabel(self, out):
        self.y_real_ = out
"""
    assert _lines(changed) == []
