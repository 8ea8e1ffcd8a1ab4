"""nnU-Net's trainer step, minimized: gradients zeroed by filling them with zeros.

Report: "Zero Grad with set_to_none True ... saves a little bit of GPU memory"
(MIC-DKFZ/nnUNet#1630).
"""
import torch
import torch.nn as nn


class nnUNetTrainer:
    def __init__(self):
        torch.manual_seed(0)
        self.network = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.LeakyReLU(), nn.Conv2d(4, 2, 1))
        self.optimizer = torch.optim.SGD(self.network.parameters(), lr=0.01, momentum=0.99, nesterov=True, weight_decay=3e-5)
        self.loss = nn.CrossEntropyLoss()

    def train_step(self, batch):
        data, target = batch["data"], batch["target"]
        self.optimizer.zero_grad(set_to_none=False)
        output = self.network(data)
        l = self.loss(output, target)
        l.backward()
        torch.nn.utils.clip_grad_norm_(self.network.parameters(), 12)
        self.optimizer.step()
        return {"loss": l.detach().cpu().numpy()}


if __name__ == "__main__":
    trainer = nnUNetTrainer()
    for epoch in range(3):
        batch = {"data": torch.randn(2, 1, 8, 8), "target": torch.randint(0, 2, (2, 8, 8))}
        print(f"epoch {epoch}: loss {float(trainer.train_step(batch)['loss']):.4f}")
