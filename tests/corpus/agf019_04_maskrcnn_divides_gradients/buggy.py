import torch
import torch.nn as nn


class GeneralizedRCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.cls = nn.Linear(4, 3)
        self.box = nn.Linear(4, 4)

    def forward(self, images, targets):
        features = self.backbone(images)
        return {
            "loss_classifier": nn.functional.cross_entropy(self.cls(features), targets["labels"]),
            "loss_box_reg": nn.functional.smooth_l1_loss(self.box(features), targets["boxes"]),
        }


def do_train(model, data_loader, optimizer, scheduler, gradient_accumulation_steps):
    model.train()
    for iteration, (images, targets) in enumerate(data_loader, 1):
        loss_dict = model(images, targets)
        losses = sum(loss for loss in loss_dict.values())
        losses.backward()

        if iteration % gradient_accumulation_steps == 0:
            # the gradients are summed over the accumulation steps: average them
            for param in model.parameters():
                if param.grad is not None:
                    param.grad.data.div_(gradient_accumulation_steps)
            optimizer.step()
            optimizer.zero_grad()
            scheduler.step()
            print(f"iter {iteration}: loss {losses.item():.4f}")


if __name__ == "__main__":
    model = GeneralizedRCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [100])
    loader = [(torch.randn(2, 3, 8, 8), {"labels": torch.randint(0, 3, (2,)), "boxes": torch.randn(2, 4)}) for _ in range(4)]
    do_train(model, loader, optimizer, scheduler, gradient_accumulation_steps=2)
