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


#: minimalRL's PPO with an LSTM policy: every K_epoch round recomputes its forwards from
#: detached hidden states and tensors the batch builder made; `delta` is cut to numpy
#: before the advantages are summed in Python, then made a tensor again
PPO_LSTM = """
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

gamma, lmbda, eps_clip, K_epoch = 0.98, 0.95, 0.1, 2


class PPO(nn.Module):
    def __init__(self):
        super().__init__()
        self.data = []
        self.fc1 = nn.Linear(4, 64)
        self.lstm = nn.LSTM(64, 32)
        self.fc_pi = nn.Linear(32, 2)
        self.fc_v = nn.Linear(32, 1)
        self.optimizer = optim.Adam(self.parameters(), lr=0.0005)

    def pi(self, x, hidden):
        x = F.relu(self.fc1(x)).view(-1, 1, 64)
        x, lstm_hidden = self.lstm(x, hidden)
        return F.softmax(self.fc_pi(x), dim=2), lstm_hidden

    def v(self, x, hidden):
        x = F.relu(self.fc1(x)).view(-1, 1, 64)
        x, lstm_hidden = self.lstm(x, hidden)
        return self.fc_v(x)

    def put_data(self, transition):
        self.data.append(transition)

    def make_batch(self):
        s_lst, a_lst, r_lst, prob_a_lst, h_in_lst = [], [], [], [], []
        for transition in self.data:
            s, a, r, prob_a, h_in = transition
            s_lst.append(s)
            a_lst.append([a])
            r_lst.append([r])
            prob_a_lst.append([prob_a])
            h_in_lst.append(h_in)
        s, a, r, prob_a = torch.tensor(s_lst, dtype=torch.float), torch.tensor(a_lst), \\
            torch.tensor(r_lst), torch.tensor(prob_a_lst)
        self.data = []
        return s, a, r, prob_a, h_in_lst[0]

    def train_net(self):
        s, a, r, prob_a, (h1_in, h2_in) = self.make_batch()
        first_hidden = (h1_in.detach(), h2_in.detach())

        for i in range(K_epoch):
            v_s = self.v(s, first_hidden).squeeze(1)
            td_target = r + gamma * v_s
            delta = td_target - v_s
            delta = delta.detach().numpy()

            advantage_lst = []
            advantage = 0.0
            for item in delta[::-1]:
                advantage = gamma * lmbda * advantage + item[0]
                advantage_lst.append([advantage])
            advantage_lst.reverse()
            advantage = torch.tensor(advantage_lst, dtype=torch.float)

            pi, _ = self.pi(s, first_hidden)
            pi_a = pi.squeeze(1).gather(1, a)
            ratio = torch.exp(torch.log(pi_a) - torch.log(prob_a))
            surr1 = ratio * advantage
            surr2 = torch.clamp(ratio, 1 - eps_clip, 1 + eps_clip) * advantage
            loss = -torch.min(surr1, surr2) + F.smooth_l1_loss(v_s, td_target.detach())

            self.optimizer.zero_grad()
            loss.mean().backward(retain_graph=True)
            self.optimizer.step()
"""


def test_a_ppo_epoch_loop_recomputing_from_detached_states_needs_no_retained_graph() -> None:
    assert _lines(PPO_LSTM) == [_line_of(PPO_LSTM, "loss.mean().backward(retain_graph=True)")]
    result = check_source(textwrap.dedent(PPO_LSTM).lstrip(), [rule_by_code("AGF011")], path="ppo_lstm.py", options=FixOptions(unsafe_fixes=True))
    assert "            loss.mean().backward()\n" in result.fixed


def test_the_advantage_stored_before_it_is_cut_keeps_the_graph_alive() -> None:
    # the Python sum now reads `delta` before the cut: every advantage holds the graph
    kept = PPO_LSTM.replace(
        "            delta = delta.detach().numpy()\n\n", "\n").replace(
        "            advantage_lst.reverse()\n", "            advantage_lst.reverse()\n            delta = delta.detach().numpy()\n")
    assert kept != PPO_LSTM
    assert _lines(kept) == []


def test_a_hidden_state_carried_without_a_cut_keeps_the_graph() -> None:
    carried = PPO_LSTM.replace("first_hidden = (h1_in.detach(), h2_in.detach())", "first_hidden = (h1_in, h2_in)")
    assert _lines(carried) == []


def test_a_batch_element_that_may_hold_a_graph_keeps_it() -> None:
    # `prob_a` now comes back from the builder as the policy's own output
    kept = PPO_LSTM.replace("return s, a, r, prob_a, h_in_lst[0]", "return s, a, r, self.pi(s, h_in_lst[0])[0], h_in_lst[0]")
    assert _lines(kept) == []
