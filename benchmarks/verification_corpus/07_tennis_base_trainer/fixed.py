"""TennisCourtDetector base_trainer.py, minimized: train() has no zero_grad.

Report: "Why there is no optimizer.zero_grad() in base_trainer.py?"
(yastrebksv/TennisCourtDetector#7; the author confirmed and fixed it).
"""
import torch
import torch.nn as nn


def train(model, train_loader, optimizer, criterion, device, epoch, max_iters=1000):
    model.train()
    losses = []
    for iter_id, batch in enumerate(train_loader):
        optimizer.zero_grad()
        out = model(batch[0].float().to(device))
        gt_hm_hp = batch[1].float().to(device)
        loss = criterion(torch.sigmoid(out), gt_hm_hp)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if iter_id > max_iters:
            break
    return sum(losses) / len(losses)
