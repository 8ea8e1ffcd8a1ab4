"""Udacity transfer-learning solution, minimized: freezing the VGG feature layers.

Report: "`require_grad` needs to be `requires_grad`" (udacity/deep-learning-v2-pytorch#12):
`param.require_grad = False` freezes nothing.
"""
import torch
import torch.nn as nn
import torch.optim as optim


class VGG(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(16, 5))

    def forward(self, x):
        return self.classifier(self.features(x))


torch.manual_seed(0)
vgg16 = VGG()
# Freeze training for all "features" layers
for param in vgg16.features.parameters():
    param.require_grad = False

criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(vgg16.classifier.parameters(), lr=0.01)
for batch_i in range(3):
    data, target = torch.randn(8, 3, 8, 8), torch.randint(0, 5, (8,))
    optimizer.zero_grad()
    output = vgg16(data)
    loss = criterion(output, target)
    loss.backward()
    optimizer.step()
    print(f"batch {batch_i}: loss {loss.item():.4f}")
