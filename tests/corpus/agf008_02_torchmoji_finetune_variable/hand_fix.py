import numpy as np
import torch
import torch.nn as nn
from torch import optim
from torch.autograd import Variable
from torch.nn.utils import clip_grad_norm_
from torch.utils.data import DataLoader, Dataset


class TorchMoji(nn.Module):
    def __init__(self, nb_classes, nb_tokens, embedding_dim=16, hidden_size=8):
        super(TorchMoji, self).__init__()
        self.nb_classes = nb_classes
        self.hidden_size = hidden_size
        self.add_module('embed', nn.Embedding(nb_tokens, embedding_dim))
        self.add_module('lstm_0', nn.LSTM(embedding_dim, hidden_size, batch_first=True, bidirectional=True))
        self.add_module('output_layer', nn.Sequential(nn.Linear(2 * hidden_size + embedding_dim, nb_classes if self.nb_classes > 2 else 1)))
        # Put model in evaluation mode by default
        self.eval()

    def forward(self, input_seqs):
        """ Forward pass.

        # Arguments:
            input_seqs: Can be one of Numpy array, Torch.LongTensor, Torch.Variable.

        # Return:
            Same format as input format.
        """
        # Check if we have Torch.LongTensor inputs or not Torch.Variable (assume Numpy array in this case), take note to return same format
        return_numpy = False
        return_tensor = False
        if isinstance(input_seqs, (torch.LongTensor, torch.cuda.LongTensor)):
            input_seqs = Variable(input_seqs)
            return_tensor = True
        elif not isinstance(input_seqs, Variable):
            input_seqs = Variable(torch.from_numpy(input_seqs.astype('int64')).long())
            return_numpy = True

        x = self.embed(input_seqs)
        x = nn.Tanh()(x)
        lstm_0_output, _ = self.lstm_0(x)
        x = torch.cat((lstm_0_output, x), dim=2).mean(1)
        outputs = self.output_layer(x)

        # Adapt return format if needed
        if return_numpy:
            outputs = outputs.data.numpy()

        return outputs


def calc_loss(loss_op, pred, yv):
    if type(loss_op) is nn.CrossEntropyLoss:
        return loss_op(pred.squeeze(), yv.squeeze())
    else:
        return loss_op(pred.squeeze(), yv.squeeze().float())


def fit_model(model, loss_op, optim_op, train_gen, val_gen, epochs):
    """ Analog to Keras fit_generator function. """
    model.eval()
    best_loss = np.mean([calc_loss(loss_op, model(Variable(xv)), Variable(yv)).item() for xv, yv in val_gen])
    print("original val loss", round(float(best_loss), 5))

    for epoch in range(epochs):
        for i, data in enumerate(train_gen):
            X_train, y_train = data
            X_train = Variable(X_train, requires_grad=False)
            y_train = Variable(y_train, requires_grad=False)
            model.train()
            optim_op.zero_grad()
            output = model(X_train)
            loss = calc_loss(loss_op, output, y_train)
            loss.backward()
            clip_grad_norm_(model.parameters(), 1)
            optim_op.step()

        model.eval()
        val_loss = np.mean([calc_loss(loss_op, model(Variable(xv)), Variable(yv)).item() for xv, yv in val_gen])
        print(epoch, "val loss", round(float(val_loss), 5))


class DeepMojiDataset(Dataset):
    def __init__(self, X_in, y_in):
        self.X_in = torch.split(X_in, 1, dim=0)
        self.y_in = torch.split(y_in, 1, dim=0)

    def __len__(self):
        return len(self.X_in)

    def __getitem__(self, idx):
        return self.X_in[idx].squeeze(), self.y_in[idx].squeeze()


if __name__ == "__main__":
    X = torch.randint(1, 50, (32, 10))
    y = (X[:, 0] > 25).long()
    train_gen = DataLoader(DeepMojiDataset(X[:24], y[:24]), batch_size=8)
    val_gen = DataLoader(DeepMojiDataset(X[24:], y[24:]), batch_size=8)
    model = TorchMoji(nb_classes=2, nb_tokens=50)
    adam = optim.Adam(model.parameters(), lr=1e-2)
    fit_model(model, nn.BCEWithLogitsLoss(), adam, train_gen, val_gen, 3)
