"""labelmodels label_model.py, minimized: the epoch's running loss sums loss tensors,
holding on to every batch's graph.

Report: "Memory leak in training loop ... running_loss is the sum of non-detached
tensors. It should be sufficient to change to running_loss += loss.item()"
(BatsResearch/labelmodels#4).
"""
import torch
from torch import nn

torch.manual_seed(0)


class NaiveBayes(nn.Module):
    def __init__(self, num_classes=2, num_lfs=5):
        super().__init__()
        self.class_balance = nn.Parameter(torch.zeros(num_classes))
        self.accuracy = nn.Parameter(torch.full((num_lfs,), 0.7))

    def forward(self, votes):
        agree = (votes > 0).float()
        return -(agree * torch.sigmoid(self.accuracy)).sum(1).mean() + self.class_balance.pow(2).sum()


def estimate_label_model(model, batches, epochs=2, lr=0.01):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for epoch in range(epochs):
        running_loss = 0.0
        for i_batch, votes in enumerate(batches):
            optimizer.zero_grad()
            loss = model(votes)
            loss.backward()
            optimizer.step()
            running_loss += loss.item() / votes.size(0)
        epoch_loss = running_loss / len(batches)
        print(f"Epoch {epoch + 1}: loss {epoch_loss:.6f}")
    return epoch_loss


if __name__ == "__main__":
    batches = [torch.randint(-1, 2, (8, 5)) for _ in range(4)]
    estimate_label_model(NaiveBayes(), batches)
