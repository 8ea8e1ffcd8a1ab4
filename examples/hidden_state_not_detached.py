"""Train a tiny LSTM language model with truncated backpropagation through time.

Bug (AGF010): the LSTM state `(h, c)` returned for one chunk of the sequence is fed into
the next chunk without `.detach()`, so the second `loss.backward()` runs into the first
chunk's graph, which the first backward already freed:
`RuntimeError: Trying to backward through the graph a second time ...`.
Run it: `python examples/hidden_state_not_detached.py`.
"""

import torch
from torch import nn


def make_chunks(count, batch_size=4, steps=12, vocab=16, seed=0):
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab, (batch_size, count * steps + 1), generator=generator)
    return [
        (tokens[:, i * steps:(i + 1) * steps], tokens[:, i * steps + 1:(i + 1) * steps + 1])
        for i in range(count)
    ]


def train(embedding, lstm, decoder, chunks, lr=0.1):
    parameters = [*embedding.parameters(), *lstm.parameters(), *decoder.parameters()]
    optimizer = torch.optim.SGD(parameters, lr=lr)
    h = torch.zeros(1, 4, 32)
    c = torch.zeros(1, 4, 32)
    for step, (inputs, targets) in enumerate(chunks):
        optimizer.zero_grad()
        out, (h, c) = lstm(embedding(inputs), (h, c))
        loss = nn.functional.cross_entropy(decoder(out).flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()
        print(f"chunk {step}: loss {loss.item():.3f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    train(nn.Embedding(16, 8), nn.LSTM(8, 32, batch_first=True), nn.Linear(32, 16), make_chunks(5))
