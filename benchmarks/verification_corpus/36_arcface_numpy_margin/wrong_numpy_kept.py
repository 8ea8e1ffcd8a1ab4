"""arcface-pytorch, minimized: the additive angular margin is computed through numpy,
then `loss.requires_grad = True` silences the "element 0 of tensors does not require
grad" error.

Report: "i add a line code in the train.py: loss.requires_grad = True ... but when i
train, the loss is not decline, and the acc is always zero" (ronghuaiyang/arcface-pytorch#56).
"""
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class ArcMarginProduct(nn.Module):
    def __init__(self, in_features, out_features, s=30.0, m=0.50):
        super().__init__()
        self.s, self.m = s, m
        self.weight = nn.Parameter(torch.randn(out_features, in_features) * 0.1)

    def forward(self, input, label):
        cosine = F.linear(F.normalize(input), F.normalize(self.weight))
        theta = np.arccos(np.clip(cosine.detach().cpu().numpy(), -1 + 1e-7, 1 - 1e-7))
        phi = torch.from_numpy(np.cos(theta + self.m)).float()
        one_hot = F.one_hot(label, cosine.size(1)).float()
        return self.s * (one_hot * phi + (1.0 - one_hot) * cosine.detach())


if __name__ == "__main__":
    model = nn.Sequential(nn.Linear(10, 8), nn.PReLU())
    metric_fc = ArcMarginProduct(8, 5)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD([*model.parameters(), *metric_fc.parameters()], lr=0.1)
    for step in range(3):
        data_input, label = torch.randn(6, 10), torch.randint(0, 5, (6,))
        output = metric_fc(model(data_input), label)
        loss = criterion(output, label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(step, loss.item())
