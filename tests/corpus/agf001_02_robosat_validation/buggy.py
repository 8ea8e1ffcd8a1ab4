import collections

import torch
import torch.nn as nn


class Metrics:
    def __init__(self, labels):
        self.labels = labels
        self.tn = self.fn = self.fp = self.tp = 0

    def add(self, actual, predicted):
        self.tp += int(((predicted == 1) & (actual == 1)).sum())
        self.fp += int(((predicted == 1) & (actual == 0)).sum())
        self.fn += int(((predicted == 0) & (actual == 1)).sum())

    def get_miou(self):
        return self.tp / max(self.tp + self.fp + self.fn, 1)


def validate(loader, num_classes, device, net, criterion):
    num_samples = 0
    running_loss = 0

    metrics = Metrics(range(num_classes))

    net.eval()

    for images, masks, tiles in loader:
        images = images.to(device)
        masks = masks.to(device)

        assert images.size()[2:] == masks.size()[1:], "resolutions for images and masks are in sync"

        num_samples += int(images.size(0))

        outputs = net(images)

        loss = criterion(outputs, masks)

        running_loss += loss.item()

        for mask, output in zip(masks, outputs):
            prediction = output.detach()
            metrics.add(mask, prediction.argmax(0))

    assert num_samples > 0, "dataset contains validation images and labels"

    return {"loss": running_loss / num_samples, "miou": metrics.get_miou()}


if __name__ == "__main__":
    device = torch.device("cpu")
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 2, 1))
    loader = [(torch.randn(2, 3, 16, 16), torch.randint(0, 2, (2, 16, 16)), None) for _ in range(3)]
    history = collections.defaultdict(list)
    stats = validate(loader, 2, device, net, nn.CrossEntropyLoss())
    print(f"loss={stats['loss']:.4f} miou={stats['miou']:.4f}")
