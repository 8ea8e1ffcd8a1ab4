import numpy as np
import torch
from torch import nn


def to_numpy(X):
    return X.detach().cpu().numpy()


class NeuralNet:
    def __init__(self, module, batch_size=4):
        self.module_ = module
        self.batch_size = batch_size

    def infer(self, x, **fit_params):
        return self.module_(x, **fit_params)

    def evaluation_step(self, Xi, training=False):
        """Perform a forward step to produce the output used for prediction and scoring."""
        with torch.set_grad_enabled(training):
            self.module_.train(training)
            return self.infer(Xi)

    def forward_iter(self, X, training=False):
        for start in range(0, len(X), self.batch_size):
            Xi = X[start : start + self.batch_size]
            yp = self.evaluation_step(Xi, training=training)
            yield yp

    def predict_proba(self, X):
        y_probas = []
        for yp in self.forward_iter(X, training=False):
            yp = yp[0] if isinstance(yp, tuple) else yp
            y_probas.append(to_numpy(yp))
        return np.concatenate(y_probas, 0)


class ClassifierModule(nn.Module):
    def __init__(self, num_units=10):
        super().__init__()
        self.dense0 = nn.Linear(20, num_units)
        self.dropout = nn.Dropout(0.5)
        self.output = nn.Linear(num_units, 2)

    def forward(self, X, **kwargs):
        X = torch.relu(self.dense0(X))
        X = self.dropout(X)
        return torch.softmax(self.output(X), dim=-1)


if __name__ == "__main__":
    net = NeuralNet(ClassifierModule())
    proba = net.predict_proba(torch.randn(10, 20))
    print(proba.shape, np.round(proba.sum(0), 4).tolist())
