import collections

import torch
from torch import nn

StepData = collections.namedtuple("StepData", ("observation", "logits", "action", "reward", "done"))


class Agent(nn.Module):
    def __init__(self, policy_layers, value_layers, discounting, reward_scaling):
        super().__init__()
        policy = []
        for w1, w2 in zip(policy_layers, policy_layers[1:]):
            policy.append(nn.Linear(w1, w2))
            policy.append(nn.SiLU())
        policy.pop()
        self.policy = nn.Sequential(*policy)
        value = []
        for w1, w2 in zip(value_layers, value_layers[1:]):
            value.append(nn.Linear(w1, w2))
            value.append(nn.SiLU())
        value.pop()
        self.value = nn.Sequential(*value)
        self.discounting = discounting
        self.reward_scaling = reward_scaling

    def loss(self, td):
        logits = self.policy(td.observation)
        values = self.value(td.observation).squeeze(-1)
        advantages = td.reward * self.reward_scaling - values
        policy_loss = -(logits.log_softmax(-1).gather(-1, td.action).squeeze(-1) * advantages.detach()).mean()
        v_loss = 0.5 * advantages.pow(2).mean()
        return policy_loss + v_loss


def train(num_timesteps=6, num_update_epochs=2):
    agent = Agent([4, 16, 2], [4, 16, 1], 0.97, 0.1)
    optimizer = torch.optim.Adam(agent.parameters(), lr=3e-4)
    sps = []
    total_loss = 0
    total_steps = 0
    for _ in range(num_timesteps):
        td = StepData(
            observation=torch.randn(8, 4),
            logits=None,
            action=torch.randint(0, 2, (8, 1)),
            reward=torch.randn(8),
            done=torch.zeros(8),
        )
        for _ in range(num_update_epochs):
            loss = agent.loss(td)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total_loss += loss.detach()
            total_steps += 1
        sps.append(total_steps)
    return total_loss / total_steps


if __name__ == "__main__":
    mean_loss = train()
    print(f"mean loss {float(mean_loss):.4f}")
