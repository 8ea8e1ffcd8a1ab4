import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim


def dice_coeff(input, target, epsilon=1e-6):
    inter = 2 * (input * target).sum(dim=(-1, -2))
    sets_sum = input.sum(dim=(-1, -2)) + target.sum(dim=(-1, -2))
    return ((inter + epsilon) / (sets_sum + epsilon)).mean()


def dice_loss(input, target):
    return 1 - dice_coeff(input, target)


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes):
        super().__init__()
        self.n_channels = n_channels
        self.n_classes = n_classes
        self.inc = nn.Sequential(nn.Conv2d(n_channels, 8, 3, padding=1), nn.ReLU(inplace=True))
        self.outc = nn.Conv2d(8, n_classes, kernel_size=1)

    def forward(self, x):
        return self.outc(self.inc(x))


def train_net(net, device, train_loader, epochs=2, learning_rate=1e-3):
    optimizer = optim.RMSprop(net.parameters(), lr=learning_rate, weight_decay=1e-8, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    global_step = 0
    for epoch in range(1, epochs + 1):
        net.train()
        epoch_loss = 0
        for batch in train_loader:
            images = batch["image"]
            true_masks = batch["mask"]

            images = images.to(device=device, dtype=torch.float32)
            true_masks = true_masks.to(device=device, dtype=torch.long)

            masks_pred = net(images)
            loss = criterion(masks_pred, true_masks) + dice_loss(
                F.softmax(masks_pred, dim=1).float(),
                F.one_hot(true_masks, net.n_classes).permute(0, 3, 1, 2).float(),
            )

            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

            global_step += 1
            epoch_loss += loss.item()
        print(f"epoch {epoch} loss {epoch_loss / len(train_loader):.4f} step {global_step}")


if __name__ == "__main__":
    net = UNet(n_channels=3, n_classes=2)
    loader = [{"image": torch.randn(2, 3, 8, 8), "mask": torch.randint(0, 2, (2, 8, 8))} for _ in range(3)]
    train_net(net, torch.device("cpu"), loader)
