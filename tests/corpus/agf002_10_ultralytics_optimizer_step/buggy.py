import math

import torch
import torch.nn as nn


class BaseTrainer:
    def __init__(self, model, batch_size=4, nbs=16):
        self.model = model
        self.batch_size = batch_size
        self.accumulate = max(round(nbs / self.batch_size), 1)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        self.epochs = 2
        self.tloss = None

    def optimizer_step(self):
        """Perform a single step of the training optimizer with gradient clipping."""
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=10.0)  # clip gradients
        self.optimizer.step()
        self.optimizer.zero_grad()

    def _do_train(self, train_loader):
        nb = len(train_loader)
        last_opt_step = -1
        for epoch in range(self.epochs):
            self.model.train()
            self.tloss = None
            for i, batch in enumerate(train_loader):
                ni = i + nb * epoch
                # Forward
                preds = self.model(batch["img"])
                self.loss = nn.functional.mse_loss(preds, batch["target"]) * self.batch_size
                self.loss_items = self.loss.detach() / self.batch_size
                self.tloss = (self.tloss * i + self.loss_items) / (i + 1) if self.tloss is not None else self.loss_items

                # Backward
                self.loss.backward()

                # Optimize - https://pytorch.org/docs/master/notes/amp_examples.html
                if ni - last_opt_step >= self.accumulate:
                    self.optimizer_step()
                    last_opt_step = ni
            print(f"epoch {epoch}: loss {self.tloss.item():.4f} accumulate {self.accumulate} last_opt_step {last_opt_step}")


if __name__ == "__main__":
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
    loader = [{"img": torch.randn(4, 6), "target": torch.randn(4, 2)} for _ in range(10)]
    BaseTrainer(model)._do_train(loader)
