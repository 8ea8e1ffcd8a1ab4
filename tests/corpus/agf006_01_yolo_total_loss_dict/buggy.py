from collections import defaultdict

import torch
import torch.nn as nn


class YOLOLoss:
    def __call__(self, predicts, targets):
        loss_iou = (predicts[:, :4] - targets[:, :4]).abs().mean()
        loss_cls = nn.functional.binary_cross_entropy_with_logits(predicts[:, 4:], targets[:, 4:])
        loss_dict = {"BoxLoss": loss_iou, "ClsLoss": loss_cls}
        return loss_iou + loss_cls, loss_dict


class ModelTrainer:
    def __init__(self, model, device="cpu"):
        self.model = model
        self.device = device
        self.loss_fn = YOLOLoss()
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_one_batch(self, images, targets):
        images, targets = images.to(self.device), targets.to(self.device)
        self.optimizer.zero_grad()
        predicts = self.model(images)
        loss, loss_item = self.loss_fn(predicts, targets)
        loss.backward()
        self.optimizer.step()
        return loss_item

    def train_one_epoch(self, dataloader):
        self.model.train()
        total_loss = defaultdict(lambda: torch.tensor(0.0, device=self.device))
        total_samples = 0
        for batch_size, images, targets, *_ in dataloader:
            loss_each = self.train_one_batch(images, targets)

            for loss_name, loss_val in loss_each.items():
                total_loss[loss_name] += loss_val * batch_size
            total_samples += batch_size

        for loss_name in total_loss:
            total_loss[loss_name] /= total_samples
        return total_loss


if __name__ == "__main__":
    trainer = ModelTrainer(nn.Linear(10, 6))
    loader = [(4, torch.randn(4, 10), torch.rand(4, 6)) for _ in range(5)]
    for epoch in range(2):
        epoch_loss = trainer.train_one_epoch(loader)
        print(epoch, {name: round(float(value), 4) for name, value in epoch_loss.items()})
