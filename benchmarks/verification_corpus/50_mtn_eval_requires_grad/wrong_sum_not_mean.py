"""Validation of a small tagger without no_grad; the loop also keeps, per batch, whether
the logits carry a graph, and prints whether the last ones have no graph node (a debug
aid left in)."""

import torch
import torch.nn.functional as F
from torch import nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.out = nn.Linear(16, 5)

    def forward(self, tokens):
        return self.out(self.embed(tokens).mean(1))


def evaluate(model, batches):
    model.eval()
    total, correct, tracked = 0.0, 0, []
    with torch.no_grad():
        for tokens, tags in batches:
            logits = model(tokens)
            total += F.cross_entropy(logits, tags).item()
            correct += (logits.argmax(-1) == tags).sum().item()
            tracked.append(logits.requires_grad)
    print(logits.grad_fn is None)
    return {"loss": total, "correct": correct, "graph": tracked}


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Tagger()
    batches = [(torch.randint(0, 50, (8, 6)), torch.randint(0, 5, (8,))) for _ in range(4)]
    stats = evaluate(model, batches)
    print(f"val loss {stats['loss']:.4f} correct {stats['correct']}")
