import torch
import torch.nn as nn
from torch import optim


class Args:
    use_amp = True
    train_epochs = 2
    learning_rate = 0.01
    pred_len = 4
    label_len = 4
    features = "M"


class Model(nn.Module):
    def __init__(self, seq_len=8, pred_len=4):
        super().__init__()
        self.pred_len = pred_len
        self.linear = nn.Linear(seq_len, pred_len)

    def forward(self, x_enc, x_mark_enc, x_dec, x_mark_dec):
        return self.linear(x_enc.permute(0, 2, 1)).permute(0, 2, 1)


class Exp_Long_Term_Forecast:
    def __init__(self, args):
        self.args = args
        self.device = torch.device("cpu")
        self.model = Model()

    def _select_optimizer(self):
        return optim.Adam(self.model.parameters(), lr=self.args.learning_rate)

    def _select_criterion(self):
        return nn.MSELoss()

    def train(self, train_loader):
        model_optim = self._select_optimizer()
        criterion = self._select_criterion()

        if self.args.use_amp:
            scaler = torch.amp.GradScaler("cuda")

        for epoch in range(self.args.train_epochs):
            train_loss = []
            self.model.train()
            for i, (batch_x, batch_y, batch_x_mark, batch_y_mark) in enumerate(train_loader):
                model_optim.zero_grad()
                batch_x = batch_x.float().to(self.device)
                batch_y = batch_y.float().to(self.device)

                dec_inp = torch.zeros_like(batch_y[:, -self.args.pred_len:, :]).float()
                dec_inp = torch.cat([batch_y[:, : self.args.label_len, :], dec_inp], dim=1).float().to(self.device)

                if self.args.use_amp:
                    with torch.amp.autocast("cuda"):
                        outputs = self.model(batch_x, batch_x_mark, dec_inp, batch_y_mark)
                        f_dim = -1 if self.args.features == "MS" else 0
                        outputs = outputs[:, -self.args.pred_len:, f_dim:]
                        batch_y = batch_y[:, -self.args.pred_len:, f_dim:].to(self.device)
                        loss = criterion(outputs, batch_y)
                        train_loss.append(loss.item())
                else:
                    outputs = self.model(batch_x, batch_x_mark, dec_inp, batch_y_mark)
                    loss = criterion(outputs[:, -self.args.pred_len:, :], batch_y[:, -self.args.pred_len:, :])
                    train_loss.append(loss.item())

                if self.args.use_amp:
                    scaler.scale(loss).backward()
                    scaler.step(model_optim)
                    scaler.update()
                else:
                    loss.backward()
                    model_optim.step()
            print("Epoch: {0} | Train Loss: {1:.7f}".format(epoch + 1, sum(train_loss) / len(train_loss)))
        return self.model


if __name__ == "__main__":
    loader = [(torch.randn(2, 8, 3), torch.randn(2, 8, 3), None, None) for _ in range(3)]
    Exp_Long_Term_Forecast(Args()).train(loader)
