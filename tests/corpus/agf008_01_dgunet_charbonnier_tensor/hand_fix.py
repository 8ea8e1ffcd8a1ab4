import torch
import torch.nn as nn
import torch.nn.functional as F


class CharbonnierLoss(nn.Module):
    """Charbonnier Loss (L1)"""

    def __init__(self, eps=1e-3):
        super(CharbonnierLoss, self).__init__()
        self.eps = eps

    def forward(self, x, y):
        diff = x - y
        return torch.mean(torch.sqrt((diff * diff) + (self.eps * self.eps)))


class EdgeLoss(nn.Module):
    def __init__(self):
        super(EdgeLoss, self).__init__()
        k = torch.Tensor([[0.05, 0.25, 0.4, 0.25, 0.05]])
        self.kernel = torch.matmul(k.t(), k).unsqueeze(0).repeat(3, 1, 1, 1)
        self.loss = CharbonnierLoss()

    def laplacian_kernel(self, current):
        filtered = F.conv2d(F.pad(current, (2, 2, 2, 2), mode="replicate"), self.kernel, groups=3)
        return current - filtered

    def forward(self, x, y):
        return self.loss(self.laplacian_kernel(x), self.laplacian_kernel(y))


class DGUNet(nn.Module):
    def __init__(self, stages=3):
        super().__init__()
        self.stages = nn.ModuleList([nn.Conv2d(3, 3, 3, padding=1) for _ in range(stages)])

    def forward(self, x):
        restored = []
        for stage in self.stages:
            x = x + stage(x)
            restored.insert(0, x)
        return restored


if __name__ == "__main__":
    model_restoration = DGUNet()
    optimizer = torch.optim.Adam(model_restoration.parameters(), lr=1e-3)
    criterion_char = CharbonnierLoss()
    criterion_edge = EdgeLoss()
    train_loader = [(torch.rand(2, 3, 12, 12), torch.rand(2, 3, 12, 12)) for _ in range(4)]
    for epoch in range(2):
        epoch_loss = 0
        for i, data in enumerate(train_loader, 0):
            for param in model_restoration.parameters():
                param.grad = None
            target = data[0]
            input_ = data[1]
            restored = model_restoration(input_)
            # Compute loss at each stage
            loss_char = sum([criterion_char(restored[j], target) for j in range(len(restored))])
            loss_edge = sum([criterion_edge(restored[j], target) for j in range(len(restored))])
            loss = (loss_char) + (0.05 * loss_edge)
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()
        print(f"epoch {epoch} loss {epoch_loss:.4f}")
