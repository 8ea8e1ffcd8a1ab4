import types

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim


class PrivacyEngine:
    """Clips and noises per-batch gradients, then clears them, as part of optimizer.step()."""

    def __init__(self, module, batch_size, sample_size, noise_multiplier, max_grad_norm):
        self.module = module
        self.noise_multiplier = noise_multiplier
        self.max_grad_norm = max_grad_norm
        self.generator = torch.Generator().manual_seed(0)

    def attach(self, optimizer):
        original_step = optimizer.step

        def dp_step(opt, closure=None):
            torch.nn.utils.clip_grad_norm_(self.module.parameters(), self.max_grad_norm)
            for p in self.module.parameters():
                if p.grad is not None:
                    p.grad += self.noise_multiplier * 0.01 * torch.randn(p.shape, generator=self.generator)
            original_step(closure)
            opt.zero_grad()

        optimizer.step = types.MethodType(dp_step, optimizer)
        optimizer.privacy_engine = self


def accuracy(preds, labels):
    return (preds == labels).mean()


def train(model, train_loader, optimizer, epoch, device):
    model.train()
    criterion = nn.CrossEntropyLoss()

    losses = []
    top1_acc = []

    for i, (images, target) in enumerate(train_loader):
        images = images.to(device)
        target = target.to(device)

        # compute output
        output = model(images)
        loss = criterion(output, target)

        preds = np.argmax(output.detach().cpu().numpy(), axis=1)
        labels = target.detach().cpu().numpy()
        acc = accuracy(preds, labels)

        losses.append(loss.item())
        top1_acc.append(acc)

        loss.backward()
        optimizer.step()

    print(f"Train Epoch: {epoch} Loss: {np.mean(losses):.6f} Acc@1: {np.mean(top1_acc) * 100:.6f}")


if __name__ == "__main__":
    model = nn.Sequential(nn.Conv2d(3, 6, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 10))
    optimizer = optim.SGD(model.parameters(), lr=0.05)
    privacy_engine = PrivacyEngine(model, batch_size=8, sample_size=32, noise_multiplier=1.1, max_grad_norm=1.0)
    privacy_engine.attach(optimizer)
    loader = [(torch.randn(8, 3, 8, 8), torch.randint(0, 10, (8,))) for _ in range(4)]
    for epoch in range(2):
        train(model, loader, optimizer, epoch, torch.device("cpu"))
