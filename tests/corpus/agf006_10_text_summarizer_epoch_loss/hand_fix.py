import time

import torch
import torch.nn as nn

# vars.py
voc_size = 30
embedding_dim = 8
hidden_dim = 16
batch_size = 4
MAX_LEN_HIGHLIGHT = 5
NUM_EPOCHS = 3
device = torch.device("cpu")


class Encoder(nn.Module):
    def __init__(self):
        super(Encoder, self).__init__()
        self.embeddings = nn.Embedding(
            num_embeddings=voc_size,
            embedding_dim=embedding_dim
        )
        self.lstm = nn.LSTM(
            input_size=embedding_dim,
            hidden_size=hidden_dim,
            num_layers=1,
            bidirectional=False,
            batch_first=True
        )

    def forward(self, input):
        embedded = self.embeddings(input)
        output, (hidden, cell) = self.lstm(embedded)
        return output, (hidden, cell)


class Decoder(nn.Module):
    def __init__(self):
        super(Decoder, self).__init__()
        self.embeddings = nn.Embedding(
            num_embeddings=voc_size,
            embedding_dim=embedding_dim
        )
        self.lstm = nn.LSTM(
            input_size=embedding_dim,
            hidden_size=hidden_dim,
            num_layers=1,
            bidirectional=False,
            batch_first=True
        )
        self.fc = nn.Linear(
            in_features=hidden_dim,
            out_features=voc_size
        )
        self.softmax = nn.LogSoftmax(dim=2)

    def forward(self, input, hidden):
        embedded = self.embeddings(input)
        output, (hidden, cell) = self.lstm(embedded, hidden)
        output = self.fc(output)
        output = self.softmax(output)
        return output, (hidden, cell)


class Seq2seq(nn.Module):
    def __init__(self, encoder, decoder):
        super(Seq2seq, self).__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, input, target):
        encoder_output, encoder_hidden = self.encoder(input)
        decoder_input = torch.tensor([2] * batch_size,
                                     dtype=torch.long, device=device).view(batch_size, -1)

        decoder_hidden = encoder_hidden

        batch_output = torch.Tensor()
        for i in range(MAX_LEN_HIGHLIGHT):
            decoder_output, decoder_hidden = self.decoder(decoder_input, decoder_hidden)
            batch_output = torch.cat((batch_output, decoder_output), 1)

        return batch_output


def train_epoch(train_iter, test_iter, criterion, model, optimizer, vocab):
    epoch_loss_train, epoch_loss_eval = 0, 0

    # training network
    model.train()
    for i, batch in enumerate(train_iter):
        batch_loss_train = 0
        optimizer.zero_grad()

        story, highlight = batch
        story = story.to(device)
        highlight = highlight.to(device)

        output = model(story, highlight)
        for sequence, target in zip(output, highlight):
            batch_loss_train += criterion(sequence, target)
        batch_loss_train.backward()
        epoch_loss_train += batch_loss_train
        optimizer.step()

    # evaluating network
    model.eval()
    for i, batch in enumerate(test_iter):
        batch_loss_eval = 0

        story, highlight = batch
        story = story.to(device)
        highlight = highlight.to(device)

        output = model(story, highlight)
        for sequence, target in zip(output, highlight):
            batch_loss_eval += criterion(sequence, target)
        epoch_loss_eval += batch_loss_eval

    return epoch_loss_train / len(train_iter), epoch_loss_eval / len(test_iter)


def train(train_iter, test_iter, criterion, model, optimizer, num_epochs=NUM_EPOCHS):
    train_loss, eval_loss = [], []
    vocab = None
    model.to(device)

    # training loop
    for epoch in range(num_epochs):
        start = time.time()
        epoch_loss_train, epoch_loss_eval = train_epoch(train_iter, test_iter, criterion, model, optimizer, vocab)
        train_loss.append(epoch_loss_train.item())
        eval_loss.append(epoch_loss_eval.item())
        elapsed_time = time.time() - start
        print("Epoch: {} | loss train: {} | loss eval: {}".format(epoch, epoch_loss_train, epoch_loss_eval))

    print("train losses", [round(float(loss), 4) for loss in train_loss], type(train_loss[-1]).__name__)
    return train_loss


if __name__ == "__main__":
    def batches(n):
        return [(torch.randint(3, voc_size, (batch_size, 7)), torch.randint(3, voc_size, (batch_size, MAX_LEN_HIGHLIGHT))) for _ in range(n)]

    model = Seq2seq(Encoder(), Decoder())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    train(batches(3), batches(2), nn.NLLLoss(), model, optimizer)
