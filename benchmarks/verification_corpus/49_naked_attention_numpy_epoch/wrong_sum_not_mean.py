"""One training epoch of a small attention model; the epoch's error and accuracy are
accumulated as tensors that still hold each batch's graph, and the batch losses are
averaged with numpy for the log."""

import numpy as np
import torch
import torch.nn.functional as F


def train_epoch(model, loader_train, optimizer):
    model.train()
    e_train, a_train = 0.0, 0.0
    batch_losses = []
    for x_batch, y_batch in loader_train:
        logits = model(x_batch)
        e_batch = F.cross_entropy(logits, y_batch)
        a_batch = (logits.argmax(1) == y_batch).float().mean()
        optimizer.zero_grad()
        e_batch.backward()
        optimizer.step()
        batch_losses.append(e_batch.item())
        e_train += e_batch.detach()
        a_train += a_batch.detach() / len(loader_train)
    return e_train, a_train, np.mean(batch_losses)
