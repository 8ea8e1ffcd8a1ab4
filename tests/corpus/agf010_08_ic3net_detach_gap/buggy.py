from collections import namedtuple
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

Transition = namedtuple('Transition', ('state', 'action', 'action_out', 'value', 'episode_mask', 'reward'))


class PredatorPreyEnv:
    """Tiny stand-in environment: agents are rewarded for picking action 1."""

    def __init__(self, nagents, obs_dim):
        self.nagents, self.obs_dim = nagents, obs_dim

    def reset(self):
        return np.random.rand(self.nagents, self.obs_dim).astype(np.float32)

    def step(self, actual):
        reward = np.asarray(actual, dtype=np.float32) - 0.5
        return np.random.rand(self.nagents, self.obs_dim).astype(np.float32), reward, False, dict()


class RNN(nn.Module):
    def __init__(self, args, num_inputs):
        super(RNN, self).__init__()
        self.nagents = args.nagents
        self.hid_size = args.hid_size
        self.encoder = nn.Linear(num_inputs, args.hid_size)
        self.lstm_unit = nn.LSTMCell(args.hid_size, args.hid_size)
        self.action_head = nn.Linear(args.hid_size, args.naction)
        self.value_head = nn.Linear(args.hid_size, 1)

    def forward(self, x, info={}):
        x, extras = x
        x = self.encoder(torch.as_tensor(x))
        hidden_state, cell_state = extras
        next_hid = self.lstm_unit(x, (hidden_state, cell_state))
        hidden_state, cell_state = next_hid
        v = self.value_head(hidden_state)
        return F.log_softmax(self.action_head(hidden_state), dim=-1), v, (hidden_state.clone(), cell_state.clone())

    def init_hidden(self, batch_size):
        return tuple((torch.zeros(batch_size, self.hid_size, requires_grad=True),
                      torch.zeros(batch_size, self.hid_size, requires_grad=True)))


def select_action(args, action_out):
    return torch.multinomial(action_out.exp(), 1).detach()


class Trainer(object):
    def __init__(self, args, policy_net, env):
        self.args = args
        self.policy_net = policy_net
        self.env = env
        self.optimizer = optim.RMSprop(policy_net.parameters(),
            lr = args.lrate, alpha=0.97, eps=1e-6)
        self.params = [p for p in self.policy_net.parameters()]

    def get_episode(self, epoch):
        episode = []
        state = self.env.reset()
        stat = dict()
        info = dict()

        prev_hid = torch.zeros(1, self.args.nagents, self.args.hid_size)

        for t in range(self.args.max_steps):
            # recurrence over time
            if self.args.recurrent:
                if self.args.rnn_type == 'LSTM' and t == 0:
                    prev_hid = self.policy_net.init_hidden(batch_size=state.shape[0])

                x = [state, prev_hid]
                action_out, value, prev_hid = self.policy_net(x, info)

                if (t + 1) % self.args.detach_gap == 0:
                    if self.args.rnn_type == 'LSTM':
                        prev_hid = (prev_hid[0].detach(), prev_hid[1].detach())
                    else:
                        prev_hid = prev_hid.detach()
            else:
                x = state
                action_out, value = self.policy_net(x, info)

            action = select_action(self.args, action_out)
            actual = action.view(-1).numpy()
            next_state, reward, done, info = self.env.step(actual)

            stat['reward'] = stat.get('reward', 0) + reward.sum()

            done = done or t == self.args.max_steps - 1
            episode_mask = np.zeros(reward.shape) if done else np.ones(reward.shape)

            trans = Transition(state, action, action_out, value, episode_mask, reward)
            episode.append(trans)
            state = next_state
            if done:
                break
        stat['num_steps'] = t + 1
        return (episode, stat)

    def compute_grad(self, batch):
        stat = dict()
        n = self.args.nagents
        batch_size = len(batch.state)

        rewards = torch.Tensor(np.stack(batch.reward))
        episode_masks = torch.Tensor(np.stack(batch.episode_mask))
        actions = torch.cat(batch.action, dim=0).view(-1)
        values = torch.cat(batch.value, dim=0).view(batch_size, n)
        log_p_a = torch.cat(batch.action_out, dim=0)

        returns = torch.Tensor(batch_size, n)
        prev_return = 0
        for i in reversed(range(rewards.size(0))):
            returns[i] = rewards[i] + self.args.gamma * prev_return * episode_masks[i]
            prev_return = returns[i].clone()

        advantages = returns - values.detach()
        log_prob = log_p_a.gather(1, actions.unsqueeze(1)).view(batch_size, n)
        action_loss = -(advantages * log_prob).sum()
        value_loss = (values - returns).pow(2).sum()
        stat['action_loss'] = action_loss.item()
        stat['value_loss'] = value_loss.item()
        loss = action_loss + self.args.value_coeff * value_loss

        loss.backward()

        return stat

    def run_batch(self, epoch):
        batch = []
        self.stats = dict()
        self.stats['num_episodes'] = 0
        while len(batch) < self.args.batch_size:
            episode, episode_stat = self.get_episode(epoch)
            self.stats['reward'] = self.stats.get('reward', 0) + episode_stat['reward']
            self.stats['num_episodes'] += 1
            batch += episode

        self.stats['num_steps'] = len(batch)
        batch = Transition(*zip(*batch))
        return batch, self.stats

    # only used when nprocesses=1
    def train_batch(self, epoch):
        batch, stat = self.run_batch(epoch)
        self.optimizer.zero_grad()

        s = self.compute_grad(batch)
        stat.update(s)
        self.optimizer.step()

        return stat


if __name__ == "__main__":
    args = SimpleNamespace(nagents=3, hid_size=8, naction=2, lrate=0.01, recurrent=True, rnn_type='LSTM',
                           detach_gap=3, max_steps=6, batch_size=12, gamma=0.9, value_coeff=0.01)
    env = PredatorPreyEnv(args.nagents, obs_dim=4)
    trainer = Trainer(args, RNN(args, num_inputs=4), env)
    for epoch in range(3):
        stat = trainer.train_batch(epoch)
        print('epoch {} reward {:.3f} action_loss {:.4f} value_loss {:.4f}'.format(
            epoch, stat['reward'], stat['action_loss'], stat['value_loss']))
