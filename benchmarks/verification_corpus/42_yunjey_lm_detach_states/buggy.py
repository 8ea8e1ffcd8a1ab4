"""yunjey/pytorch-tutorial language_model main.py, minimized, without the
`states = detach(states)` line the reporter asked about.

Report: "language model detach(states): why shouldn't states be updated after every
training step? ... what does this step do?" (yunjey/pytorch-tutorial#90).
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
embed_size, hidden_size, num_layers = 16, 32, 1
vocab_size, batch_size, seq_length = 50, 4, 6


class RNNLM(nn.Module):
    def __init__(self, vocab_size, embed_size, hidden_size, num_layers):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_size)
        self.lstm = nn.LSTM(embed_size, hidden_size, num_layers, batch_first=True)
        self.linear = nn.Linear(hidden_size, vocab_size)

    def forward(self, x, h):
        out, (h, c) = self.lstm(self.embed(x), h)
        out = out.reshape(out.size(0) * out.size(1), out.size(2))
        return self.linear(out), (h, c)


model = RNNLM(vocab_size, embed_size, hidden_size, num_layers)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.002)
ids = torch.randint(0, vocab_size, (batch_size, seq_length * 4 + 1))

for epoch in range(2):
    states = (torch.zeros(num_layers, batch_size, hidden_size), torch.zeros(num_layers, batch_size, hidden_size))
    for i in range(0, ids.size(1) - seq_length, seq_length):
        inputs = ids[:, i : i + seq_length]
        targets = ids[:, (i + 1) : (i + 1) + seq_length]
        outputs, states = model(inputs, states)
        loss = criterion(outputs, targets.reshape(-1))
        model.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
    print(epoch, loss.item())
