import torch
import torch.nn as nn
from torch.nn.utils import weight_norm


class SimpleClassifier(nn.Module):
    def __init__(self, in_dim, hid_dim, out_dim, dropout):
        super(SimpleClassifier, self).__init__()
        layers = [
            weight_norm(nn.Linear(in_dim, hid_dim), dim=None),
            nn.ReLU(),
            nn.Dropout(dropout, inplace=False),
            weight_norm(nn.Linear(hid_dim, out_dim), dim=None),
        ]
        self.main = nn.Sequential(*layers)

    def forward(self, x):
        logits = self.main(x)
        return logits


def instance_bce_with_logits(logits, labels):
    loss = nn.functional.binary_cross_entropy_with_logits(logits, labels)
    loss *= labels.size(1)
    return loss


if __name__ == "__main__":
    classifier = SimpleClassifier(8, 16, 5, 0.5)
    optim = torch.optim.Adamax(classifier.parameters())
    classifier.train()
    for i in range(3):
        joint_repr = torch.randn(4, 8)
        answers = torch.rand(4, 5)
        pred = classifier(joint_repr)
        loss = instance_bce_with_logits(pred, answers)
        loss.backward()
        optim.step()
        optim.zero_grad()
        print(i, round(loss.item(), 4))
