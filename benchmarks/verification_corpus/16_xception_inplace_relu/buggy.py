"""imgclsmob Xception unit, minimized: a shared nn.ReLU(inplace=True) rewrites a
tensor the shortcut convolution saved for backward.

Report: "Inplace ReLU's are unnecessary and wrong"; "Removing of inplace=True fixes
this" (osmr/imgclsmob#13).
"""
import torch
from torch import nn

torch.manual_seed(0)


class XceptionUnit(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.identity_conv = nn.Conv2d(in_channels, out_channels, 1)
        self.activ = nn.ReLU(inplace=True)
        self.body = nn.Sequential(nn.Conv2d(in_channels, out_channels, 3, padding=1), nn.BatchNorm2d(out_channels))

    def forward(self, x):
        identity = self.identity_conv(x)
        x = self.activ(x)
        x = self.body(x)
        return x + identity


class TinyXception(nn.Module):
    def __init__(self, num_classes=5):
        super().__init__()
        self.features = nn.Sequential(XceptionUnit(3, 8), XceptionUnit(8, 8), nn.AdaptiveAvgPool2d(1))
        self.output = nn.Linear(8, num_classes)

    def forward(self, x):
        return self.output(self.features(x).flatten(1))


if __name__ == "__main__":
    model = TinyXception()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        images, labels = torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))
        loss = criterion(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(step, loss.item())
