import torch
import torch.nn as nn
import torch.nn.functional as F


class AverageMeter:
    def __init__(self):
        self.sum = 0.0
        self.count = 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n

    @property
    def avg(self):
        return self.sum / max(self.count, 1)


class DecoupleModel(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.classifier = nn.Conv2d(8, num_classes, 1)
        self.aux_classifier = nn.Conv2d(8, num_classes, 1)

    def forward(self, x):
        feat = self.backbone(x)
        return self.classifier(feat), self.aux_classifier(feat), feat


def train(train_loader, model, optimizer, epoch, lambda_aux=0.4, lambda_reg=0.01):
    model.train()
    loss_meter = AverageMeter()
    main_loss_meter = AverageMeter()
    for i, (input_src, target_src, input_tgt) in enumerate(train_loader):
        output_src, aux_src, feat_src = model(input_src)
        _, _, feat_tgt = model(input_tgt)

        loss = 0
        main_loss = F.cross_entropy(output_src, target_src)
        loss += main_loss
        aux_loss = F.cross_entropy(aux_src, target_src)
        loss += lambda_aux * aux_loss
        reg_loss = (feat_src.mean((0, 2, 3)) - feat_tgt.mean((0, 2, 3))).pow(2).sum()
        loss += lambda_reg * reg_loss

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        n = input_src.size(0)
        loss_meter.update(loss.item(), n)
        main_loss_meter.update(main_loss.item(), n)
    print(f"Epoch {epoch}: loss {loss_meter.avg:.4f} main {main_loss_meter.avg:.4f}")


if __name__ == "__main__":
    model = DecoupleModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = [(torch.randn(2, 3, 8, 8), torch.randint(0, 4, (2, 8, 8)), torch.randn(2, 3, 8, 8)) for _ in range(3)]
    for epoch in range(2):
        train(loader, model, optimizer, epoch)
