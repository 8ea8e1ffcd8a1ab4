import string

import torch
import torch.nn as nn

all_characters = string.printable
n_characters = len(all_characters)
chunk_len = 12


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size, n_layers=1):
        super(RNN, self).__init__()
        self.hidden_size = hidden_size
        self.n_layers = n_layers
        self.encoder = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, n_layers)
        self.decoder = nn.Linear(hidden_size, output_size)

    def forward(self, input, hidden):
        input = self.encoder(input.view(1, -1))
        output, hidden = self.gru(input.view(1, 1, -1), hidden)
        output = self.decoder(output.view(1, -1))
        return output, hidden

    def init_hidden(self):
        return torch.zeros(self.n_layers, 1, self.hidden_size)


def char_tensor(string):
    return torch.tensor([all_characters.index(c) for c in string], dtype=torch.long)


def random_training_set(text, i):
    chunk = text[i : i + chunk_len + 1]
    return char_tensor(chunk[:-1]), char_tensor(chunk[1:])


decoder = RNN(n_characters, 16, n_characters)
decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=0.005)
criterion = nn.CrossEntropyLoss()


def train(inp, target):
    hidden = decoder.init_hidden()
    decoder.zero_grad()
    loss = 0

    for c in range(chunk_len):
        output, hidden = decoder(inp[c], hidden)
        loss += criterion(output, target[c].unsqueeze(0))

    loss.backward()
    decoder_optimizer.step()

    return loss.item() / chunk_len


if __name__ == "__main__":
    text = "the quick brown fox jumps over the lazy dog " * 3
    for epoch in range(1, 4):
        loss = train(*random_training_set(text, epoch * 5))
        print(epoch, round(loss, 4))
