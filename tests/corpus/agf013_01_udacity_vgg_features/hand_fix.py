import torch
import torch.nn as nn
import torch.optim as optim

vgg16 = nn.Module()
vgg16.features = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
vgg16.classifier = nn.Linear(4, 2)

# Freeze training for all "features" layers
for param in vgg16.features.parameters():
    param.requires_grad = False

optimizer = optim.SGD(vgg16.parameters(), lr=0.01)
for _ in range(2):
    x = torch.randn(4, 3, 8, 8)
    loss = vgg16.classifier(vgg16.features(x)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(vgg16.features[0].weight.grad is None)
