import torch
import torch.nn as nn
import torch.nn.functional as F


class RNNAgent(nn.Module):
    def __init__(self, input_shape, rnn_hidden_dim=16, n_actions=4):
        super().__init__()
        self.rnn_hidden_dim = rnn_hidden_dim
        self.fc1 = nn.Linear(input_shape, rnn_hidden_dim)
        self.rnn = nn.GRUCell(rnn_hidden_dim, rnn_hidden_dim)
        self.fc2 = nn.Linear(rnn_hidden_dim, n_actions)

    def init_hidden(self):
        return self.fc1.weight.new(1, self.rnn_hidden_dim).zero_()

    def forward(self, inputs, hidden_state):
        x = F.relu(self.fc1(inputs))
        h_in = hidden_state.reshape(-1, self.rnn_hidden_dim)
        h = self.rnn(x, h_in)
        q = self.fc2(h)
        return q, h


class BasicMAC:
    def __init__(self, input_shape, n_agents):
        self.n_agents = n_agents
        self.agent = RNNAgent(input_shape)
        self.hidden_states = None

    def parameters(self):
        return self.agent.parameters()

    def forward(self, batch, t):
        agent_inputs = batch["obs"][:, t].reshape(batch["obs"].size(0) * self.n_agents, -1)
        agent_outs, self.hidden_states = self.agent(agent_inputs, self.hidden_states)
        return agent_outs.view(batch["obs"].size(0), self.n_agents, -1)

    def init_hidden(self, batch_size):
        self.hidden_states = self.agent.init_hidden().unsqueeze(0).expand(batch_size, self.n_agents, -1)


class QLearner:
    def __init__(self, mac, lr=5e-4, gamma=0.99):
        self.mac = mac
        self.params = list(mac.parameters())
        self.optimiser = torch.optim.RMSprop(params=self.params, lr=lr, alpha=0.99, eps=1e-5)
        self.gamma = gamma

    def train(self, batch, max_seq_length):
        rewards = batch["reward"][:, :-1]
        actions = batch["actions"][:, :-1]

        # Calculate estimated Q-Values
        mac_out = []
        self.mac.init_hidden(batch["obs"].size(0))
        for t in range(max_seq_length):
            agent_outs = self.mac.forward(batch, t=t)
            mac_out.append(agent_outs)
        mac_out = torch.stack(mac_out, dim=1)  # Concat over time

        chosen_action_qvals = torch.gather(mac_out[:, :-1], dim=3, index=actions).squeeze(3)
        target_max_qvals = mac_out[:, 1:].max(dim=3)[0].detach()
        targets = rewards + self.gamma * target_max_qvals
        td_error = chosen_action_qvals - targets
        loss = (td_error**2).mean()

        self.optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 10)
        self.optimiser.step()
        return loss.item()


if __name__ == "__main__":
    n_agents, T = 2, 5
    learner = QLearner(BasicMAC(input_shape=6, n_agents=n_agents))
    for step in range(3):
        batch = {
            "obs": torch.randn(4, T, n_agents, 6),
            "reward": torch.randn(4, T, 1),
            "actions": torch.randint(0, 4, (4, T, n_agents, 1)),
        }
        print(step, round(learner.train(batch, T), 4))
