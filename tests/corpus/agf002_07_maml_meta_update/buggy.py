import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class MAMLFewShotClassifier(nn.Module):
    def __init__(self, num_classes=3, meta_learning_rate=0.001):
        super().__init__()
        self.classifier = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, num_classes))
        self.optimizer = optim.Adam(self.trainable_parameters(), lr=meta_learning_rate, amsgrad=False)
        self.scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer=self.optimizer, T_max=10, eta_min=1e-5)

    def trainable_parameters(self):
        for param in self.parameters():
            if param.requires_grad:
                yield param

    def forward(self, data_batch, epoch):
        x_support_set, x_target_set, y_support_set, y_target_set = data_batch
        support_loss = F.cross_entropy(self.classifier(x_support_set), y_support_set)
        target_preds = self.classifier(x_target_set)
        loss = F.cross_entropy(target_preds, y_target_set) + 0.1 * support_loss
        accuracy = (target_preds.argmax(1) == y_target_set).float().mean()
        return {"loss": loss, "accuracy": accuracy}, target_preds

    def meta_update(self, loss):
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

    def run_train_iter(self, data_batch, epoch):
        epoch = int(epoch)
        self.scheduler.step(epoch=epoch)
        if not self.training:
            self.train()
        losses, per_task_target_preds = self.forward(data_batch=data_batch, epoch=epoch)
        self.meta_update(loss=losses["loss"])
        losses["learning_rate"] = self.scheduler.get_lr()[0]
        self.optimizer.zero_grad()
        self.zero_grad()
        return {k: float(v) for k, v in losses.items()}, per_task_target_preds


if __name__ == "__main__":
    model = MAMLFewShotClassifier()
    for it in range(4):
        batch = (torch.randn(6, 5), torch.randn(6, 5), torch.randint(0, 3, (6,)), torch.randint(0, 3, (6,)))
        losses, _ = model.run_train_iter(batch, epoch=it // 2)
        print(it, f"{losses['loss']:.4f} {losses['accuracy']:.4f}")
