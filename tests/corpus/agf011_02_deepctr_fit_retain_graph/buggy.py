import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class BaseModel(nn.Module):
    def __init__(self, input_dim=6, l2_reg_linear=1e-4):
        super().__init__()
        self.linear_model = nn.Linear(input_dim, 1)
        self.dnn = nn.Sequential(nn.Linear(input_dim, 8), nn.ReLU(), nn.Linear(8, 1))
        self.regularization_weight = [(list(self.linear_model.parameters()), 0.0, l2_reg_linear)]
        self.aux_loss = 0

    def forward(self, X):
        return torch.sigmoid(self.linear_model(X) + self.dnn(X))

    def get_regularization_loss(self):
        total_reg_loss = torch.zeros((1,))
        for weight_list, l1, l2 in self.regularization_weight:
            for w in weight_list:
                total_reg_loss += torch.sum(l1 * torch.abs(w)) + l2 * torch.sum(torch.square(w))
        return total_reg_loss

    def compile(self, optimizer, loss):
        self.optim = torch.optim.Adagrad(self.parameters(), lr=0.05) if optimizer == "adagrad" else optimizer
        self.loss_func = F.binary_cross_entropy if loss == "binary_crossentropy" else loss

    def fit(self, x, y, batch_size=8, epochs=2, verbose=1):
        train_tensor_data = TensorDataset(x, y)
        train_loader = DataLoader(dataset=train_tensor_data, shuffle=False, batch_size=batch_size)
        model = self.train()
        loss_func = self.loss_func
        optim = self.optim
        for epoch in range(epochs):
            loss_epoch = 0
            total_loss_epoch = 0
            for _, (x_train, y_train) in enumerate(train_loader):
                x = x_train.float()
                y = y_train.float()

                y_pred = model(x).squeeze()

                optim.zero_grad()
                loss = loss_func(y_pred, y.squeeze(), reduction="sum")
                reg_loss = self.get_regularization_loss()

                total_loss = loss + reg_loss + self.aux_loss

                loss_epoch += loss.item()
                total_loss_epoch += total_loss.item()
                total_loss.backward(retain_graph=True)
                optim.step()
            if verbose > 0:
                print("Epoch {0} - loss: {1: .4f}".format(epoch + 1, total_loss_epoch / len(train_loader)))


if __name__ == "__main__":
    model = BaseModel()
    model.compile("adagrad", "binary_crossentropy")
    x = torch.randn(32, 6)
    y = (x[:, 0] > 0).float()
    model.fit(x, y)
