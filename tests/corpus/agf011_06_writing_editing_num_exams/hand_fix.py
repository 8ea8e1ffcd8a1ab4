from types import SimpleNamespace

import torch
import torch.nn as nn
from torch import optim
from torch.utils.data import DataLoader

config = SimpleNamespace(num_exams=2, max_grad_norm=5.0, lr=0.01, batch_size=4)
args = SimpleNamespace(cuda=False)
vocab_size = 20


class FbSeq2seq(nn.Module):
    """Writing-editing network, reduced: encodes the title and, from the second pass on, the previous draft."""

    def __init__(self, hidden=16):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, hidden)
        self.encoder_title = nn.GRU(hidden, hidden, batch_first=True)
        self.encoder = nn.GRU(hidden, hidden, batch_first=True)
        self.decoder = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab_size)

    def forward(self, input_variable, prev_generated_seq, input_lengths, target_variable, teacher_forcing_ratio):
        _, h = self.encoder_title(self.embedding(input_variable))
        if prev_generated_seq is not None:
            _, h_prev = self.encoder(self.embedding(prev_generated_seq))
            h = h + h_prev
        decoder_input = self.embedding(target_variable[:, :-1])
        decoder_outputs, _ = self.decoder(decoder_input, h)
        return torch.log_softmax(self.out(decoder_outputs), dim=2), None, {}


model = FbSeq2seq()

criterion = nn.CrossEntropyLoss(ignore_index=0)
optimizer = optim.Adam(model.parameters(), lr=config.lr)

# Mask variable
def _mask(prev_generated_seq):
    prev_mask = torch.eq(prev_generated_seq, 1)
    lengths = torch.argmax(prev_mask.long(), dim=1)
    max_len = prev_generated_seq.size(1)
    mask = []
    for i in range(prev_generated_seq.size(0)):
        if lengths[i] == 0:
            mask_line = [0] * max_len
        else:
            mask_line = [0] * lengths[i].item()
            mask_line.extend([1] * (max_len - lengths[i].item()))
        mask.append(mask_line)
    mask = torch.BoolTensor(mask)
    return prev_generated_seq.data.masked_fill_(mask, 0)

def train_batch(input_variable, input_lengths, target_variable, model,
                teacher_forcing_ratio):
    loss_list = []
    # Forward propagation
    prev_generated_seq = None
    target_variable_reshaped = target_variable[:, 1:].contiguous().view(-1)

    for i in range(config.num_exams):
        decoder_outputs, _, other = \
            model(input_variable, prev_generated_seq, input_lengths,
                   target_variable, teacher_forcing_ratio)

        decoder_outputs_reshaped = decoder_outputs.view(-1, vocab_size)
        lossi = criterion(decoder_outputs_reshaped, target_variable_reshaped)
        loss_list.append(lossi.item())
        model.zero_grad()
        lossi.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        optimizer.step()
        prev_generated_seq = torch.squeeze(torch.topk(decoder_outputs, 1, dim=2)[1]).view(-1, decoder_outputs.size(1))
        prev_generated_seq = _mask(prev_generated_seq)
    return loss_list


def train_epoches(dataset, model, n_epochs, teacher_forcing_ratio):
    train_loader = DataLoader(dataset, config.batch_size)
    model.train(True)
    for epoch in range(1, n_epochs + 1):
        epoch_examples_total = 0
        epoch_loss_list = [0] * config.num_exams
        for batch_idx, (source, target, input_lengths) in enumerate(train_loader):
            input_variables = source
            target_variables = target
            # train model
            loss_list = train_batch(input_variables, input_lengths.tolist(),
                               target_variables, model, teacher_forcing_ratio)
            # Record average loss
            num_examples = len(source)
            epoch_examples_total += num_examples
            for i in range(config.num_exams):
                epoch_loss_list[i] += loss_list[i] * num_examples

        for i in range(config.num_exams):
            epoch_loss_list[i] /= float(epoch_examples_total)
        print("epoch {} losses {}".format(epoch, [round(l, 4) for l in epoch_loss_list]))


if __name__ == "__main__":
    source = torch.randint(2, vocab_size, (8, 5))
    target = torch.randint(2, vocab_size, (8, 7))
    dataset = [(source[i], target[i], torch.tensor(5)) for i in range(8)]
    train_epoches(dataset, model, n_epochs=3, teacher_forcing_ratio=1.0)
