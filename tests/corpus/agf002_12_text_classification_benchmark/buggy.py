# -*- coding: utf-8 -*-
from collections import namedtuple

import torch
import torch.nn as nn
import torch.optim as optim
from torch.nn.modules.loss import NLLLoss

Batch = namedtuple("Batch", ["text", "label"])


class Opt:
    batch_size = 4
    learning_rate = 0.01
    grad_clip = 0.1
    vocab_size = 30
    embedding_dim = 8
    hidden_dim = 8
    label_size = 2


class LSTMClassifier(nn.Module):
    def __init__(self, opt):
        super(LSTMClassifier, self).__init__()
        self.word_embeddings = nn.Embedding(opt.vocab_size, opt.embedding_dim)
        self.lstm = nn.LSTM(opt.embedding_dim, opt.hidden_dim, batch_first=True)
        self.hidden2label = nn.Linear(opt.hidden_dim, opt.label_size)

    def forward(self, sentence):
        embeds = self.word_embeddings(sentence)
        lstm_out, _ = self.lstm(embeds)
        return nn.functional.log_softmax(self.hidden2label(lstm_out[:, -1]), dim=-1)


def clip_gradient(optimizer, grad_clip):
    for group in optimizer.param_groups:
        for param in group["params"]:
            if param.grad is not None and param.requires_grad:
                param.grad.data.clamp_(-grad_clip, grad_clip)


opt = Opt()
train_iter = [Batch(text=(torch.randint(0, 30, (4, 7)), None), label=torch.randint(0, 2, (4,))) for _ in range(5)]

model = LSTMClassifier(opt)
model.train()
optimizer = optim.Adam(model.parameters(), lr=opt.learning_rate)
optimizer.zero_grad()
loss_fun = NLLLoss()

for index, batch in enumerate(train_iter):
    if len(batch.text[0]) == opt.batch_size:
        predicted = model(batch.text[0])

        loss = loss_fun(predicted, batch.label)
        loss.backward()
        clip_gradient(optimizer, opt.grad_clip)
        optimizer.step()
        print("loss : %.5f" % loss.data.numpy())
