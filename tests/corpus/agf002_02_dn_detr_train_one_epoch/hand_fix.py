import math
import sys
from typing import Iterable

import torch
import torch.nn as nn


class SetCriterion(nn.Module):
    def __init__(self, weight_dict):
        super().__init__()
        self.weight_dict = weight_dict

    def forward(self, outputs, targets, mask_dict=None):
        boxes = torch.cat([t["boxes"] for t in targets])
        labels = torch.cat([t["labels"] for t in targets])
        loss_bbox = nn.functional.l1_loss(outputs["pred_boxes"], boxes)
        loss_ce = nn.functional.cross_entropy(outputs["pred_logits"], labels)
        return {"loss_ce": loss_ce, "loss_bbox": loss_bbox}


class DABDETR(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self.backbone = nn.Linear(16, 32)
        self.class_embed = nn.Linear(32, num_classes)
        self.bbox_embed = nn.Linear(32, 4)

    def forward(self, samples, dn_args=None):
        hs = torch.relu(self.backbone(samples))
        return {"pred_logits": self.class_embed(hs), "pred_boxes": self.bbox_embed(hs).sigmoid()}, None


def train_one_epoch(model: torch.nn.Module, criterion: torch.nn.Module,
                    data_loader: Iterable, optimizer: torch.optim.Optimizer,
                    device: torch.device, epoch: int, max_norm: float = 0):
    model.train()
    criterion.train()
    stats = []
    for samples, targets in data_loader:
        samples = samples.to(device)
        targets = [{k: v.to(device) for k, v in t.items()} for t in targets]

        outputs, mask_dict = model(samples, dn_args=(targets, 5))
        loss_dict = criterion(outputs, targets, mask_dict)
        weight_dict = criterion.weight_dict
        losses = sum(loss_dict[k] * weight_dict[k] for k in loss_dict.keys() if k in weight_dict)

        loss_value = losses.item()
        if not math.isfinite(loss_value):
            print("Loss is {}, stopping training".format(loss_value))
            sys.exit(1)

        # original backward function
        optimizer.zero_grad()
        losses.backward()
        if max_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        stats.append(loss_value)
    return {"loss": sum(stats) / len(stats)}


if __name__ == "__main__":
    model = DABDETR()
    criterion = SetCriterion({"loss_ce": 1, "loss_bbox": 5})
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    loader = [
        (torch.randn(6, 16), [{"boxes": torch.rand(3, 4), "labels": torch.randint(0, 3, (3,))} for _ in range(2)])
        for _ in range(4)
    ]
    for epoch in range(3):
        print(epoch, f"{train_one_epoch(model, criterion, loader, optimizer, torch.device('cpu'), epoch, 0.1)['loss']:.4f}")
