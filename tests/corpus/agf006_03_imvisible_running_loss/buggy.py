import torch
import torch.nn as nn


class LYTNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(4, 5)
        self.regressor = nn.Linear(4, 4)

    def forward(self, x):
        f = self.features(x)
        return self.classifier(f), self.regressor(f)


def my_loss(pred_classes, pred_direc, points, classes):
    MSE = nn.functional.mse_loss(pred_direc, points)
    cross_entropy = nn.functional.cross_entropy(pred_classes, classes)
    loss = MSE + cross_entropy
    return loss, MSE, cross_entropy


if __name__ == "__main__":
    net = LYTNet()
    optimizer = torch.optim.Adam(net.parameters(), lr=0.001)
    traindataloader = [
        {"image": torch.randn(4, 3, 12, 12), "mode": torch.randint(0, 5, (4,)), "points": torch.rand(4, 4)} for _ in range(4)
    ]
    for epoch in range(2):
        net.train()
        running_loss = 0.0
        running_loss_MSE = 0.0
        running_loss_cross_entropy = 0.0
        for i, data in enumerate(traindataloader, 0):
            images = data["image"]
            mode = data["mode"]
            points = data["points"]
            optimizer.zero_grad()
            pred_classes, pred_direc = net(images)
            loss, MSE, cross_entropy = my_loss(pred_classes, pred_direc, points, mode)
            loss.backward()
            optimizer.step()
            running_loss += loss
            running_loss_MSE += MSE
            running_loss_cross_entropy += cross_entropy
        n = len(traindataloader)
        print(f"epoch {epoch}: {running_loss / n:.4f} {running_loss_MSE / n:.4f} {running_loss_cross_entropy / n:.4f}")
