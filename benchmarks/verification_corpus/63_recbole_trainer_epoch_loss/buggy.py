"""A RecBole-style `Trainer` (RUCAIBox/RecBole#307): `_train_epoch` adds each batch's
loss tensor to `total_loss`, so every batch's graph stays alive until the epoch ends
(out of memory on a large dataset). The trainer is built from a config mapping and a
model the module does not define; the project's `run_custom.py` builds both."""

import torch.optim as optim


class Trainer:
    def __init__(self, config, model):
        self.config = config
        self.model = model
        self.learner = config["learner"]
        self.learning_rate = config["learning_rate"]
        self.epochs = config["epochs"]
        self.device = config["device"]
        self.optimizer = self._build_optimizer()

    def _build_optimizer(self):
        if self.learner.lower() == "adam":
            return optim.Adam(self.model.parameters(), lr=self.learning_rate)
        return optim.SGD(self.model.parameters(), lr=self.learning_rate)

    def _train_epoch(self, train_data, epoch_idx):
        self.model.train()
        total_loss = None
        for batch_idx, interaction in enumerate(train_data):
            interaction = {key: value.to(self.device) for key, value in interaction.items()}
            self.optimizer.zero_grad()
            loss = self.model.calculate_loss(interaction)
            total_loss = loss if total_loss is None else total_loss + loss
            loss.backward()
            self.optimizer.step()
        return total_loss

    def fit(self, train_data):
        train_loss = None
        for epoch_idx in range(self.epochs):
            train_loss = self._train_epoch(train_data, epoch_idx)
        return train_loss
