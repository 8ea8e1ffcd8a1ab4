"""OpenNMT-py Trainer, minimized: validate() never disables autograd.

Report: "torch.no_grad() is not used in validate()" (OpenNMT/OpenNMT-py#1141).
"""
import torch
from torch import nn

torch.manual_seed(0)


class Statistics:
    def __init__(self, loss=0.0, n_words=0, n_correct=0):
        self.loss, self.n_words, self.n_correct = loss, n_words, n_correct

    def update(self, stat):
        self.loss += stat.loss
        self.n_words += stat.n_words
        self.n_correct += stat.n_correct

    def xent(self):
        return self.loss / self.n_words


class TinyNMT(nn.Module):
    def __init__(self, vocab=20, hidden=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.rnn = nn.GRU(hidden, hidden, batch_first=True)
        self.generator = nn.Linear(hidden, vocab)

    def forward(self, src):
        out, _ = self.rnn(self.embed(src))
        return self.generator(out)


class Trainer:
    def __init__(self, model, optim):
        self.model = model
        self.optim = optim
        self.criterion = nn.CrossEntropyLoss(reduction="sum")

    def _stats(self, loss, scores, target):
        pred = scores.argmax(-1)
        return Statistics(loss.item(), target.numel(), (pred == target).sum().item())

    def train_epoch(self, train_iter):
        self.model.train()
        for src, tgt in train_iter:
            scores = self.model(src)
            loss = self.criterion(scores.flatten(0, 1), tgt.flatten())
            self.optim.zero_grad()
            loss.backward()
            self.optim.step()

    def validate(self, valid_iter):
        self.model.eval()
        stats = Statistics()
        for src, tgt in valid_iter:
            outputs = self.model(src)
            loss = self.criterion(outputs.flatten(0, 1), tgt.flatten())
            stats.update(self._stats(loss, outputs, tgt))
        self.model.train()
        return stats


if __name__ == "__main__":
    model = TinyNMT()
    trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=1e-3))
    data = [(torch.randint(0, 20, (4, 7)), torch.randint(0, 20, (4, 7))) for _ in range(4)]
    for epoch in range(2):
        trainer.train_epoch(data[:3])
        valid_stats = trainer.validate(data[3:])
        print(f"epoch {epoch}: valid xent {valid_stats.xent():.4f}")
