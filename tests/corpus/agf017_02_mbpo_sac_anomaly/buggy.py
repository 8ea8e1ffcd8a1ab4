import torch
import torch.nn.functional as F
from torch.optim import Adam

torch.autograd.set_detect_anomaly(True)


class SAC(object):
    def __init__(self):
        self.critic = torch.nn.Linear(4, 1)
        self.critic_optim = Adam(self.critic.parameters(), lr=3e-4)

    def update_parameters(self, memory, updates):
        for _ in range(updates):
            state_batch, target = memory
            qf1_loss = F.mse_loss(self.critic(state_batch), target)
            self.critic_optim.zero_grad()
            qf1_loss.backward()
            self.critic_optim.step()
        return qf1_loss.item()


print(SAC().update_parameters((torch.randn(5, 4), torch.randn(5, 1)), 2))
