import torch
import torch.nn as nn


class nnUNetTrainer:
    def __init__(self):
        self.network = nn.Conv2d(1, 2, 3, padding=1)
        self.optimizer = torch.optim.SGD(self.network.parameters(), lr=0.01, momentum=0.99, nesterov=True)
        self.loss = nn.CrossEntropyLoss()

    def train_step(self, data, target):
        self.optimizer.zero_grad(set_to_none=False)
        l = self.loss(self.network(data), target)
        l.backward()
        self.optimizer.step()
        return l.item()


trainer = nnUNetTrainer()
print(trainer.train_step(torch.randn(2, 1, 8, 8), torch.randint(0, 2, (2, 8, 8))))
