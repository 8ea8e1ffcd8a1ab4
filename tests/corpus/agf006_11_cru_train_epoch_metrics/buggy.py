from types import SimpleNamespace

import torch
import torch.nn as nn


def rmse(target, predicted, mask):
    return torch.sqrt(mse(target, predicted, mask))


def mse(target, predicted, mask):
    return ((target - predicted) ** 2 * mask).sum() / mask.sum()


def GaussianNegLogLik(targets, pred_mean, pred_variance, mask):
    const = torch.log(torch.tensor(2 * torch.pi))
    sq = (targets - pred_mean) ** 2 / pred_variance
    return 0.5 * ((torch.log(pred_variance) + sq + const) * mask).sum() / mask.sum()


class CRU(nn.Module):
    def __init__(self, target_dim, lsd, args):
        super(CRU, self).__init__()
        self.args = args
        self.encoder = nn.GRU(target_dim, lsd, batch_first=True)
        self.dec_mean = nn.Linear(lsd, target_dim)
        self.dec_var = nn.Sequential(nn.Linear(lsd, target_dim), nn.Softplus())

    def forward(self, obs_batch):
        latent, _ = self.encoder(obs_batch)
        return self.dec_mean(latent), self.dec_var(latent) + 1e-4

    def interpolation(self, data):
        obs, truth, mask_obs, mask_truth = data
        output_mean, output_var = self.forward(obs)
        intermediates = None
        loss = GaussianNegLogLik(truth, output_mean, output_var, mask_truth)
        # imputation metrics on the points that were masked out of the input
        mask_imput = (1 - mask_obs) * mask_truth
        imput_loss = GaussianNegLogLik(truth, output_mean, output_var, mask_imput)
        imput_mse = mse(truth, output_mean, mask_imput)
        return loss, output_mean, output_var, obs, truth, mask_obs, mask_truth, intermediates, imput_loss, imput_mse

    # new code component
    def train_epoch(self, dl, optimizer):
        """Trains model for one epoch

        :param dl: dataloader containing training data
        :param optimizer: optimizer to use for training
        :return: evaluation metrics, computed output, input, intermediate variables
        """
        epoch_ll = 0
        epoch_rmse = 0
        epoch_mse = 0

        if self.args.task == 'extrapolation' or self.args.task == 'interpolation':
            epoch_imput_ll = 0
            epoch_imput_mse = 0

        for i, data in enumerate(dl):

            if self.args.task == 'interpolation':
                loss, output_mean, output_var, obs, truth, mask_obs, mask_truth, intermediates, imput_loss, imput_mse = self.interpolation(
                    data)
            else:
                raise Exception('Unknown task')

            # check for NaNs
            if torch.any(torch.isnan(loss)):
                print('--NAN in loss')
            torch.autograd.set_detect_anomaly(
                self.args.anomaly_detection)

            # backpropagation
            optimizer.zero_grad()
            loss.backward()
            if self.args.grad_clip:
                nn.utils.clip_grad_norm_(self.parameters(), 1)
            optimizer.step()

            # aggregate metrics and intermediates over entire epoch
            epoch_ll += loss
            epoch_rmse += rmse(truth, output_mean, mask_truth).item()
            epoch_mse += mse(truth, output_mean, mask_truth).item()

            if self.args.task == 'extrapolation' or self.args.task == 'interpolation':
                epoch_imput_ll += imput_loss
                epoch_imput_mse += imput_mse
                imput_metrics = [epoch_imput_ll/(i+1), epoch_imput_mse/(i+1)]
            else:
                imput_metrics = None

        return epoch_ll/(i+1), epoch_rmse/(i+1), epoch_mse/(i+1), [output_mean, output_var], intermediates, [obs, truth, mask_obs], imput_metrics


if __name__ == "__main__":
    args = SimpleNamespace(task='interpolation', anomaly_detection=False, grad_clip=True, save_intermediates=None)
    model = CRU(target_dim=2, lsd=6, args=args)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    truth = torch.sin(torch.linspace(0, 6, 10)).repeat(8, 2, 1).transpose(1, 2)
    mask_obs = (torch.rand(8, 10, 2) > 0.3).float()
    dl = [(truth[j:j + 4] * mask_obs[j:j + 4], truth[j:j + 4], mask_obs[j:j + 4], torch.ones(4, 10, 2)) for j in (0, 4)]
    for epoch in range(3):
        train_ll, train_rmse, train_mse, train_output, intermediates, train_input, train_imput_metrics = model.train_epoch(dl, optimizer)
        print('epoch {} train_ll {:.4f} rmse {:.4f} imput_ll {:.4f} imput_mse {:.4f} ({})'.format(
            epoch, train_ll, train_rmse, train_imput_metrics[0], train_imput_metrics[1], type(train_ll).__name__))
