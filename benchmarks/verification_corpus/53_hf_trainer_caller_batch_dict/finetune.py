"""The project's fine-tuning entry: builds the model, the tokenized batches and the
optimizer, and calls `train_epoch` (no `__main__`: a launcher imports and calls
`training_function`)."""

from types import SimpleNamespace

import torch
from torch import nn
import torch.nn.functional as F

from buggy import train_epoch

VOCAB = 32
SEQ = 12
BATCH = 4


class TinyCausalLM(nn.Module):
    def __init__(self, vocab, width=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.mix = nn.Linear(width, width)
        self.head = nn.Linear(width, vocab)

    def forward(self, input_ids, attention_mask, labels=None):
        hidden = torch.tanh(self.mix(self.embed(input_ids))) * attention_mask.unsqueeze(-1)
        logits = self.head(hidden)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1))
        return SimpleNamespace(loss=loss, logits=logits)


def tokenized_batches(count, generator):
    batches = []
    for _ in range(count):
        ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator)
        batches.append({"input_ids": ids, "attention_mask": torch.ones(BATCH, SEQ), "labels": ids.clone()})
    return batches


def training_function(epochs=2):
    generator = torch.Generator().manual_seed(0)
    model = TinyCausalLM(VOCAB)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = tokenized_batches(6, generator)
    for epoch in range(epochs):
        mean_loss = train_epoch(model, batches, optimizer, grad_accum=2)
        print(f"epoch {epoch}: loss {mean_loss.item():.4f}")
