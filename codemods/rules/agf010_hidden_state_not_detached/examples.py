"""VALID / INVALID examples of `agf010_hidden_state_not_detached` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. word_language_model: repackage_hidden at the top of each batch
    valid(
        """
import torch

def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)

def train(model, train_data, criterion, optimizer, bptt):
    hidden = model.init_hidden(20)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        optimizer.step()
"""
    ),
    # 2. detached in the call itself
    valid(
        """
import torch

def train(rnn, batches, optimizer):
    h = torch.zeros(1, 8, 32)
    for x, y in batches:
        optimizer.zero_grad()
        out, h = rnn(x, h.detach())
        loss = (out - y).pow(2).mean()
        loss.backward()
        optimizer.step()
"""
    ),
    # 3. state re-initialised every batch
    valid(
        """
import torch

def train(model, loader, optimizer, criterion):
    for x, y in loader:
        hidden = model.init_hidden(x.size(0))
        optimizer.zero_grad()
        out, hidden = model(x, hidden)
        criterion(out, y).backward()
        optimizer.step()
"""
    ),
    # 4. no backward in the loop: text generation
    valid(
        """
import torch

@torch.no_grad()
def generate(model, start, steps):
    hidden = model.init_hidden(1)
    token = start
    for _ in range(steps):
        logits, hidden = model(token, hidden)
        token = logits.argmax(-1)
    return token
"""
    ),
    # 5. chunked TBPTT: backward every k steps under an `if`, detach there
    valid(
        """
import torch

def train(cell, xs, ys, optimizer, k):
    h = torch.zeros(4, 16)
    loss = 0
    for t in range(len(xs)):
        h = cell(xs[t], h)
        loss = loss + (h - ys[t]).pow(2).mean()
        if (t + 1) % k == 0:
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            h = h.detach()
            loss = 0
"""
    ),
    # 6. in-place detach_ on the LSTM tuple
    valid(
        """
import torch

def train(lstm, head, loader, optimizer):
    h = torch.zeros(1, 4, 8)
    c = torch.zeros(1, 4, 8)
    for x, y in loader:
        h.detach_()
        c.detach_()
        out, (h, c) = lstm(x, (h, c))
        loss = (head(out) - y).abs().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""
    ),
    # 7. the state is not fed back (a fresh zero state each call)
    valid(
        """
import torch

def train(model, loader, optimizer):
    for x, y in loader:
        out, hidden = model(x, None)
        loss = (out - y).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""
    ),
    # 8. a helper detaches the state in place
    valid(
        """
import torch

def train(model, loader, optimizer):
    hidden = model.init_hidden(8)
    for x, y in loader:
        detach_hidden(hidden)
        out, hidden = model(x, hidden)
        model.loss(out, y).backward()
        optimizer.step()
"""
    ),
    # 9. the recurrent call itself is under no_grad (warm-up), backward elsewhere
    valid(
        """
import torch

def train(model, loader, optimizer):
    memory = model.initial_memory()
    for x, y in loader:
        with torch.no_grad():
            _, memory = model(x, memory)
        loss = model.loss(x, y)
        loss.backward()
        optimizer.step()
"""
    ),
    # state None at first, detached right after the call already (the tutorial's own fix)
    valid(
        """
import torch


def train(model, loader, optimizer):
    hidden = None
    for x, y in loader:
        out, hidden = model(x, hidden)
        hidden = hidden.detach()
        loss = (out - y).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""
    ),
    # state kept on the module, reset by the training loop every batch
    valid(
        """
import torch
import torch.nn as nn


class CharGRU(nn.Module):
    def __init__(self, vocab=50, width=32, batch=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.gru = nn.GRU(width, width, batch_first=True)
        self.head = nn.Linear(width, vocab)
        self.state = torch.zeros(1, batch, width)

    def reset_state(self, batch=8):
        self.state = torch.zeros(1, batch, self.gru.hidden_size)

    def forward(self, tokens):
        out, self.state = self.gru(self.embed(tokens), self.state)
        return self.head(out)


def fit(net, batches, optimizer):
    for tokens, targets in batches:
        net.reset_state(tokens.size(0))
        logits = net(tokens)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


model = CharGRU()
fit(model, [(torch.randint(0, 50, (8, 12)), torch.randint(0, 50, (8, 12)))] * 3, torch.optim.Adam(model.parameters()))
"""
    ),
    # state kept on the module, detached in forward before use
    valid(
        """
import torch
import torch.nn as nn


class CharGRU(nn.Module):
    def __init__(self, vocab=50, width=32, batch=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.gru = nn.GRU(width, width, batch_first=True)
        self.head = nn.Linear(width, vocab)
        self.state = torch.zeros(1, batch, width)

    def reset_state(self, batch=8):
        self.state = torch.zeros(1, batch, self.gru.hidden_size)

    def forward(self, tokens):
        self.state = self.state.detach()
        out, self.state = self.gru(self.embed(tokens), self.state)
        return self.head(out)


model = CharGRU()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    tokens = torch.randint(0, 50, (8, 12))
    loss = model(tokens).logsumexp(-1).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
    ),
    # the loop calls a reset the class inherits from a base out of view
    valid(
        """
import torch
import torch.nn as nn
from .stateful import StatefulMixin


class SpikeRNN(StatefulMixin, nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.cell = nn.RNN(width, width)
        self.membrane = torch.zeros(1, 4, width)

    def forward(self, x):
        out, self.membrane = self.cell(x, self.membrane)
        return out


net = SpikeRNN()
optimizer = torch.optim.Adam(net.parameters())
for step in range(5):
    net.reset_states()
    loss = net(torch.randn(7, 4, 16)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
    ),
]

INVALID = [
    # 1. LSTM language model with an unpacked (h, c) state
    invalid(
        """
import torch
from torch import nn

def train(lstm, decoder, batches, optimizer):
    h = torch.zeros(2, 16, 64)
    c = torch.zeros(2, 16, 64)
    for x, y in batches:
        optimizer.zero_grad()
        out, (h, c) = lstm(x, (h, c))
        loss = nn.functional.cross_entropy(decoder(out).flatten(0, 1), y.flatten())
        loss.backward()
        optimizer.step()
""",
        """
import torch
from torch import nn

def train(lstm, decoder, batches, optimizer):
    h = torch.zeros(2, 16, 64)
    c = torch.zeros(2, 16, 64)
    for x, y in batches:
        h, c = h.detach(), c.detach()
        optimizer.zero_grad()
        out, (h, c) = lstm(x, (h, c))
        loss = nn.functional.cross_entropy(decoder(out).flatten(0, 1), y.flatten())
        loss.backward()
        optimizer.step()
""",
    ),
    # 2. GRU with a tensor state made by torch.zeros
    invalid(
        """
import torch

def train(gru, head, loader, optimizer, criterion):
    hidden = torch.zeros(1, 32, 128)
    for inputs, targets in loader:
        # forward
        output, hidden = gru(inputs, hidden)
        loss = criterion(head(output), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
""",
        """
import torch

def train(gru, head, loader, optimizer, criterion):
    hidden = torch.zeros(1, 32, 128)
    for inputs, targets in loader:
        hidden = hidden.detach()
        # forward
        output, hidden = gru(inputs, hidden)
        loss = criterion(head(output), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
""",
    ),
    # 3. LSTM state kept as one tuple built before the loop
    invalid(
        """
import torch

def fit(model, loader, optimizer):
    state = (torch.zeros(1, 4, 8), torch.zeros(1, 4, 8))
    for x, y in loader:
        pred, state = model(x, state)
        loss = (pred - y).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
""",
        """
import torch

def fit(model, loader, optimizer):
    state = (torch.zeros(1, 4, 8), torch.zeros(1, 4, 8))
    for x, y in loader:
        state = tuple(h.detach() for h in state)
        pred, state = model(x, state)
        loss = (pred - y).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
""",
    ),
    # 4. init_hidden of unknown shape: tensor-or-tuple detach (unsafe fix)
    invalid(
        """
import torch

def train_epoch(model, corpus, criterion, optimizer):
    model.train()
    hidden = model.init_hidden(20)
    for data, targets in corpus:
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizer.step()
""",
        """
import torch

def train_epoch(model, corpus, criterion, optimizer):
    model.train()
    hidden = model.init_hidden(20)
    for data, targets in corpus:
        hidden = hidden.detach() if isinstance(hidden, torch.Tensor) else tuple(h.detach() for h in hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizer.step()
""",
    ),
    # 5. a script at module level with a while loop and a GRUCell
    invalid(
        """
import torch

cell = torch.nn.GRUCell(8, 16)
opt = torch.optim.Adam(cell.parameters())
h = torch.zeros(4, 16)
step = 0
while step < 100:
    x = torch.randn(4, 8)
    h = cell(x, h)
    loss = h.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
""",
        """
import torch

cell = torch.nn.GRUCell(8, 16)
opt = torch.optim.Adam(cell.parameters())
h = torch.zeros(4, 16)
step = 0
while step < 100:
    h = h.detach()
    x = torch.randn(4, 8)
    h = cell(x, h)
    loss = h.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    step += 1
""",
    ),
    # 6. retain_graph=True added to silence the error: fix is unsafe
    invalid(
        """
import torch

def train(rnn, loader, optimizer):
    hx = torch.zeros(1, 2, 10)
    for x, y in loader:
        out, hx = rnn(x, hx)
        loss = torch.nn.functional.mse_loss(out, y)
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()
""",
        """
import torch

def train(rnn, loader, optimizer):
    hx = torch.zeros(1, 2, 10)
    for x, y in loader:
        hx = hx.detach()
        out, hx = rnn(x, hx)
        loss = torch.nn.functional.mse_loss(out, y)
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()
""",
    ),
    # 7. state initialised to None: `None.detach()` would fail at the top, so it is detached right after the call
    invalid(
        """
import torch

def train(model, loader, optimizer):
    hidden = None
    for x, y in loader:
        out, hidden = model(x, hidden)
        loss = (out - y).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
""",
        """
import torch

def train(model, loader, optimizer):
    hidden = None
    for x, y in loader:
        out, hidden = model(x, hidden)
        hidden = hidden.detach() if isinstance(hidden, torch.Tensor) else tuple(h.detach() for h in hidden)
        loss = (out - y).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
""",
    ),
    # 8. a trainer method: timesteps in an inner loop, backward once per batch, AMP
    invalid(
        """
import torch

class Trainer:
    def train_epoch(self, loader):
        memory = torch.zeros(self.batch_size, self.dim)
        for seq, target in loader:
            for t in range(seq.size(1)):
                memory = self.cell(seq[:, t], memory)
            with torch.autocast("cpu"):
                loss = self.head(memory).sub(target).pow(2).mean()
            self.optimizer.zero_grad()
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
""",
        """
import torch

class Trainer:
    def train_epoch(self, loader):
        memory = torch.zeros(self.batch_size, self.dim)
        for seq, target in loader:
            memory = memory.detach()
            for t in range(seq.size(1)):
                memory = self.cell(seq[:, t], memory)
            with torch.autocast("cpu"):
                loss = self.head(memory).sub(target).pow(2).mean()
            self.optimizer.zero_grad()
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
""",
    ),
    # 9. state is a function parameter (shape and None-ness unknown): detached right after the call, unsafe
    invalid(
        """
import torch

def train(model, loader, optimizer, hidden):
    for x, y in loader:
        out, hidden = model(x, hidden)
        loss = (out - y).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return hidden
""",
        """
import torch

def train(model, loader, optimizer, hidden):
    for x, y in loader:
        out, hidden = model(x, hidden)
        hidden = hidden.detach() if isinstance(hidden, torch.Tensor) else tuple(h.detach() for h in hidden)
        loss = (out - y).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return hidden
""",
    ),
    # module-level loop, state None at first (MorvanZhou/PyTorch-Tutorial#57's shape): detached after the call
    invalid(
        """
import torch
from torch import nn

gru = nn.GRU(input_size=4, hidden_size=16, batch_first=True)
head = nn.Linear(16, 1)
optimizer = torch.optim.SGD([*gru.parameters(), *head.parameters()], lr=0.01)
state = None  # first chunk starts from zeros

for chunk in torch.randn(6, 2, 5, 4):
    out, state = gru(chunk, state)
    loss = head(out).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
        """
import torch
from torch import nn

gru = nn.GRU(input_size=4, hidden_size=16, batch_first=True)
head = nn.Linear(16, 1)
optimizer = torch.optim.SGD([*gru.parameters(), *head.parameters()], lr=0.01)
state = None  # first chunk starts from zeros

for chunk in torch.randn(6, 2, 5, 4):
    out, state = gru(chunk, state)
    state = state.detach() if isinstance(state, torch.Tensor) else tuple(h.detach() for h in state)
    loss = head(out).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
    ),
    # state None at first and read by the loss after the call: detaching there would drop its gradient, report only
    invalid(
        """
import torch


def train(model, loader, optimizer):
    hidden = None
    for x, y in loader:
        out, hidden = model(x, hidden)
        loss = (out - y).pow(2).mean() + 1e-3 * (hidden ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""
    ),
    # state kept on the module by forward; the training loop is in a function the model is passed to
    invalid(
        """
import torch
import torch.nn as nn


class CharGRU(nn.Module):
    def __init__(self, vocab=50, width=32, batch=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.gru = nn.GRU(width, width, batch_first=True)
        self.head = nn.Linear(width, vocab)
        self.state = torch.zeros(1, batch, width)

    def reset_state(self, batch=8):
        self.state = torch.zeros(1, batch, self.gru.hidden_size)

    def forward(self, tokens):
        out, self.state = self.gru(self.embed(tokens), self.state)
        return self.head(out)


def fit(net, batches, optimizer):
    for tokens, targets in batches:
        logits = net(tokens)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


model = CharGRU()
model.reset_state()
fit(model, [(torch.randint(0, 50, (8, 12)), torch.randint(0, 50, (8, 12)))] * 3, torch.optim.Adam(model.parameters()))
""",
        """
import torch
import torch.nn as nn


class CharGRU(nn.Module):
    def __init__(self, vocab=50, width=32, batch=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.gru = nn.GRU(width, width, batch_first=True)
        self.head = nn.Linear(width, vocab)
        self.state = torch.zeros(1, batch, width)

    def reset_state(self, batch=8):
        self.state = torch.zeros(1, batch, self.gru.hidden_size)

    def forward(self, tokens):
        self.state = self.state.detach()
        out, self.state = self.gru(self.embed(tokens), self.state)
        return self.head(out)


def fit(net, batches, optimizer):
    for tokens, targets in batches:
        logits = net(tokens)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


model = CharGRU()
model.reset_state()
fit(model, [(torch.randint(0, 50, (8, 12)), torch.randint(0, 50, (8, 12)))] * 3, torch.optim.Adam(model.parameters()))
""",
    ),
]
