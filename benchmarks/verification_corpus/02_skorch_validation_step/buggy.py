"""skorch NeuralNet, minimized: validation_step() runs the module with autograd on.

Report: GPU memory grows with every validation batch until "out of memory"
(skorch-dev/skorch#218; fixed in #219 by wrapping validation_step in no_grad).
"""
import torch
from torch import nn


class NeuralNet:
    def __init__(self, module, criterion, optimizer=torch.optim.SGD, lr=0.01):
        self.module_ = module
        self.criterion_ = criterion
        self.optimizer_ = optimizer(self.module_.parameters(), lr=lr)

    def infer(self, x):
        return self.module_(x)

    def get_loss(self, y_pred, y_true):
        return self.criterion_(y_pred, y_true)

    def train_step(self, Xi, yi):
        self.module_.train()
        self.optimizer_.zero_grad()
        y_pred = self.infer(Xi)
        loss = self.get_loss(y_pred, yi)
        loss.backward()
        self.optimizer_.step()
        return {"loss": loss, "y_pred": y_pred}

    def validation_step(self, Xi, yi):
        self.module_.eval()
        y_pred = self.infer(Xi)
        loss = self.get_loss(y_pred, yi)
        return {"loss": loss, "y_pred": y_pred}
