import torch
import torch.nn as nn


class SupervisedTrainer:
    def __init__(self, network, optimizer, optim_set_to_none=False):
        self.network = network
        self.optimizer = optimizer
        self.optim_set_to_none = optim_set_to_none

    def iteration(self, x):
        self.network.train()
        self.optimizer.zero_grad(set_to_none=self.optim_set_to_none)
        loss = self.network(x).pow(2).mean()
        loss.backward()
        self.optimizer.step()
        return loss.item()


net = nn.Linear(4, 2)
print(SupervisedTrainer(net, torch.optim.SGD(net.parameters(), lr=0.1)).iteration(torch.randn(3, 4)))
