import math

import torch
from torch import nn


class LanguageModel(nn.Module):
    def __init__(self, ntoken=30, embedding_size=8, hidden_size=16, nlayers=1):
        super().__init__()
        self.hidden_size = hidden_size
        self.nlayers = nlayers
        self.encoder = nn.Embedding(ntoken, embedding_size)
        self.rnn = nn.LSTM(embedding_size, hidden_size, nlayers)
        self.decoder = nn.Linear(hidden_size, ntoken)

    def init_hidden(self, bsz):
        weight = next(self.parameters()).detach()
        return (weight.new(self.nlayers, bsz, self.hidden_size).zero_(),
                weight.new(self.nlayers, bsz, self.hidden_size).zero_())

    def forward(self, input, hidden):
        emb = self.encoder(input)
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(output)
        return decoded, output, hidden


class LanguageModelTrainer:
    def __init__(self, model, clip=0.25):
        self.model = model
        self.clip = clip
        self.loss_function = torch.nn.CrossEntropyLoss()

    @staticmethod
    def _get_batch(source, i, sequence_length):
        seq_len = min(sequence_length, len(source) - 1 - i)
        data = source[i : i + seq_len].clone().detach()
        target = source[i + 1 : i + 1 + seq_len].view(-1).clone().detach()
        return data, target

    @staticmethod
    def _repackage_hidden(h):
        """Wraps hidden states in new tensors, to detach them from their history."""
        return tuple(v.detach() for v in h)

    def train_split(self, train_data, sequence_length, mini_batch_size, optimizer):
        self.model.train()
        ntokens = self.model.decoder.out_features
        hidden = self.model.init_hidden(mini_batch_size)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, sequence_length)):
            data, targets = self._get_batch(train_data, i, sequence_length)

            self.model.zero_grad()
            optimizer.zero_grad()

            # do the forward pass in the model
            output, rnn_output, hidden = self.model.forward(data, hidden)

            # try to predict the targets
            loss = self.loss_function(output.view(-1, ntokens), targets)
            # Backpropagate the error
            loss.backward()

            # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)

            optimizer.step()

            print("batch {} loss {:5.2f} ppl {:8.2f}".format(batch, loss.item(), math.exp(loss.item())))

            # We detach the hidden state from how it was previously produced.
            # If we didn't, the model would try backpropagating all the way to start of the dataset.
            hidden = self._repackage_hidden(hidden)


if __name__ == "__main__":
    model = LanguageModel()
    trainer = LanguageModelTrainer(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    trainer.train_split(torch.randint(0, 30, (25, 3)), 6, 3, optimizer)
