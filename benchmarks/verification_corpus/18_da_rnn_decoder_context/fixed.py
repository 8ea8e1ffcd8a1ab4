"""da-rnn modules.py Decoder, minimized: the attention context is updated with `+=`,
but the previous step's linear layer saved it for backward.

Report: "When I run main.py ... one of the variables needed for gradient computation
has been modified by an inplace operation; I am trying to modify an item with +="
(Seanny123/da-rnn#14).
"""
import torch
from torch import nn


class Decoder(nn.Module):
    def __init__(self, encoder_hidden_size=6, decoder_hidden_size=5, T=4):
        super().__init__()
        self.T = T
        self.attn = nn.Linear(decoder_hidden_size, encoder_hidden_size)
        self.fc = nn.Linear(encoder_hidden_size, 1)
        self.fc_y = nn.Linear(1, 1)
        self.gru = nn.GRUCell(1, decoder_hidden_size)
        self.fc_final = nn.Linear(decoder_hidden_size + encoder_hidden_size, 1)

    def forward(self, input_encoded, y_history):
        n = input_encoded.size(0)
        hidden = input_encoded.new_zeros(n, self.gru.hidden_size)
        context = input_encoded.new_zeros(n, input_encoded.size(2))
        for t in range(self.T - 1):
            scores = torch.bmm(input_encoded, self.attn(hidden).unsqueeze(2)).squeeze(2)
            attn_weights = torch.softmax(scores, dim=1)
            context = context + torch.bmm(attn_weights.unsqueeze(1), input_encoded).squeeze(1)
            y_tilde = self.fc(context) + self.fc_y(y_history[:, t : t + 1])
            hidden = self.gru(y_tilde, hidden)
        return self.fc_final(torch.cat((hidden, context), dim=1))
