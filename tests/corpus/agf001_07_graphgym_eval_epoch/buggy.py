import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Batch:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def to(self, device):
        return Batch(self.x.to(device), self.y.to(device))


class GNN(nn.Module):
    def __init__(self, dim_in, dim_out):
        super().__init__()
        self.pre_mp = nn.Linear(dim_in, 16)
        self.post_mp = nn.Linear(16, dim_out)

    def forward(self, batch):
        h = F.relu(self.pre_mp(batch.x))
        return self.post_mp(h), batch.y


def compute_loss(pred, true):
    loss = F.cross_entropy(pred, true)
    return loss, F.softmax(pred, dim=-1)


class Logger:
    def __init__(self, name):
        self.name = name
        self.losses = []

    def update_stats(self, true, pred, loss, lr, time_used, params):
        self.losses.append(loss)

    def write_epoch(self, cur_epoch):
        print(f"{self.name} epoch {cur_epoch}: loss {sum(self.losses) / len(self.losses):.4f}")
        self.losses = []


def train_epoch(logger, loader, model, optimizer, scheduler):
    model.train()
    time_start = time.time()
    for batch in loader:
        optimizer.zero_grad()
        batch = batch.to("cpu")
        pred, true = model(batch)
        loss, pred_score = compute_loss(pred, true)
        loss.backward()
        optimizer.step()
        logger.update_stats(true=true.detach().cpu(), pred=pred_score.detach().cpu(), loss=loss.item(),
                            lr=scheduler.get_last_lr()[0], time_used=time.time() - time_start, params=0)
        time_start = time.time()
    scheduler.step()


def eval_epoch(logger, loader, model):
    model.eval()
    time_start = time.time()
    for batch in loader:
        batch = batch.to("cpu")
        pred, true = model(batch)
        loss, pred_score = compute_loss(pred, true)
        logger.update_stats(true=true.detach().cpu(), pred=pred_score.detach().cpu(), loss=loss.item(),
                            lr=0, time_used=time.time() - time_start, params=0)
        time_start = time.time()


def train(loggers, loaders, model, optimizer, scheduler, max_epoch=2):
    num_splits = len(loggers)
    for cur_epoch in range(max_epoch):
        train_epoch(loggers[0], loaders[0], model, optimizer, scheduler)
        loggers[0].write_epoch(cur_epoch)
        for i in range(1, num_splits):
            eval_epoch(loggers[i], loaders[i], model)
            loggers[i].write_epoch(cur_epoch)


if __name__ == "__main__":
    model = GNN(5, 3)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
    loaders = [[Batch(torch.randn(6, 5), torch.randint(0, 3, (6,))) for _ in range(3)] for _ in range(3)]
    train([Logger("train"), Logger("val"), Logger("test")], loaders, model, optimizer, scheduler)
