import numpy as np
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, T, input_size, encoder_num_hidden):
        super(Encoder, self).__init__()
        self.encoder_num_hidden = encoder_num_hidden
        self.T = T
        self.encoder_lstm = nn.LSTM(input_size=input_size, hidden_size=encoder_num_hidden, batch_first=True)

    def forward(self, X):
        X_encoded, _ = self.encoder_lstm(X)
        return X, X_encoded


class Decoder(nn.Module):
    def __init__(self, T, encoder_num_hidden):
        super(Decoder, self).__init__()
        self.fc = nn.Linear(encoder_num_hidden + 1, 1)

    def forward(self, X_encoded, y_prev):
        return self.fc(torch.cat([X_encoded[:, -1, :], y_prev[:, -1:]], dim=1))


class DA_rnn(nn.Module):
    def __init__(self, X, y, T, encoder_num_hidden=8, batch_size=4):
        super(DA_rnn, self).__init__()
        self.T = T
        self.X = X
        self.y = y
        self.batch_size = batch_size
        self.device = torch.device("cpu")
        self.Encoder = Encoder(T=T, input_size=X.shape[1], encoder_num_hidden=encoder_num_hidden)
        self.Decoder = Decoder(T=T, encoder_num_hidden=encoder_num_hidden)
        self.train_timesteps = int(self.X.shape[0] * 0.7)

    @torch.no_grad()
    def test(self, on_train=False):
        """Prediction."""
        if on_train:
            y_pred = np.zeros(self.train_timesteps - self.T + 1)
        else:
            y_pred = np.zeros(self.X.shape[0] - self.train_timesteps)

        i = 0
        while i < len(y_pred):
            batch_idx = np.array(range(len(y_pred)))[i : (i + self.batch_size)]
            X = np.zeros((len(batch_idx), self.T - 1, self.X.shape[1]))
            y_history = np.zeros((len(batch_idx), self.T - 1))

            for j in range(len(batch_idx)):
                if on_train:
                    X[j, :, :] = self.X[range(batch_idx[j], batch_idx[j] + self.T - 1), :]
                    y_history[j, :] = self.y[range(batch_idx[j], batch_idx[j] + self.T - 1)]
                else:
                    X[j, :, :] = self.X[range(batch_idx[j] + self.train_timesteps - self.T, batch_idx[j] + self.train_timesteps - 1), :]
                    y_history[j, :] = self.y[range(batch_idx[j] + self.train_timesteps - self.T, batch_idx[j] + self.train_timesteps - 1)]

            y_history = torch.from_numpy(y_history).type(torch.FloatTensor).to(self.device)
            _, input_encoded = self.Encoder(torch.from_numpy(X).type(torch.FloatTensor).to(self.device))
            y_pred[i : (i + self.batch_size)] = self.Decoder(input_encoded, y_history).cpu().detach().numpy()[:, 0]
            i += self.batch_size

        return y_pred


if __name__ == "__main__":
    rng = np.random.RandomState(0)
    X = rng.randn(40, 3)
    y = rng.randn(40)
    model = DA_rnn(X, y, T=5)
    print(np.round(model.test(), 4).tolist())
