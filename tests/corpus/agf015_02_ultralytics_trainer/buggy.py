import torch
import torch.nn as nn


class BaseTrainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def optimizer_step(self):
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=10.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=False)

    def train(self, batches):
        self.optimizer.zero_grad(set_to_none=False)
        for x in batches:
            self.model(x).pow(2).mean().backward()
            self.optimizer_step()


BaseTrainer(nn.Linear(4, 2)).train([torch.randn(3, 4) for _ in range(2)])
print("done")
