import logging
from collections import defaultdict

import torch
import torch.nn.functional as F


class STFTLoss(torch.nn.Module):
    """Spectral convergence and log STFT magnitude losses (one resolution)."""

    def __init__(self, fft_size=64, shift_size=16):
        super().__init__()
        self.fft_size, self.shift_size = fft_size, shift_size
        self.register_buffer("window", torch.hann_window(fft_size))

    def _mag(self, x):
        spec = torch.stft(x, self.fft_size, self.shift_size, window=self.window, return_complex=True)
        return spec.abs().clamp(min=1e-7)

    def forward(self, x, y):
        x_mag, y_mag = self._mag(x), self._mag(y)
        sc_loss = torch.norm(y_mag - x_mag, p="fro") / torch.norm(y_mag, p="fro")
        mag_loss = F.l1_loss(torch.log(y_mag), torch.log(x_mag))
        return sc_loss, mag_loss


class Generator(torch.nn.Module):
    def __init__(self, aux_channels=4, upsample=16):
        super().__init__()
        self.upsample = torch.nn.Upsample(scale_factor=upsample)
        self.conv = torch.nn.Conv1d(1 + aux_channels, 1, 3, padding=1)

    def forward(self, z, c):
        return torch.tanh(self.conv(torch.cat([z, self.upsample(c)], dim=1)))


class Discriminator(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Sequential(torch.nn.Conv1d(1, 4, 3, padding=1), torch.nn.LeakyReLU(0.2), torch.nn.Conv1d(4, 1, 3, padding=1))

    def forward(self, x):
        return self.conv(x)


class Trainer(object):
    """Customized trainer module for Parallel WaveGAN training."""

    def __init__(self,
                 steps,
                 epochs,
                 data_loader,
                 model,
                 criterion,
                 optimizer,
                 scheduler,
                 config,
                 device=torch.device("cpu"),
                 ):
        self.steps = steps
        self.epochs = epochs
        self.data_loader = data_loader
        self.model = model
        self.criterion = criterion
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.config = config
        self.device = device
        self.finish_train = False
        self.total_train_loss = defaultdict(float)
        self.total_eval_loss = defaultdict(float)

    def run(self):
        """Run training."""
        while True:
            # train one epoch
            self._train_epoch()

            # check whether training is finished
            if self.finish_train:
                break

        logging.info("finished training.")

    def _train_step(self, batch):
        """Train model one step."""
        # parse batch
        batch = [b.to(self.device) for b in batch]
        z, c, y, _ = batch

        # calculate loss for generator
        y_ = self.model["generator"](z, c)
        y, y_ = y.squeeze(1), y_.squeeze(1)
        sc_loss, mag_loss = self.criterion["stft"](y_, y)
        gen_loss = sc_loss + mag_loss
        if self.steps > self.config["discriminator_train_start_steps"]:
            p_ = self.model["discriminator"](y_.unsqueeze(1)).squeeze(1)
            adv_loss = self.criterion["mse"](p_, p_.new_ones(p_.size()))
            gen_loss += self.config["lambda_adv"] * adv_loss
            self.total_train_loss["train/adversarial_loss"] += adv_loss.item()
        self.total_train_loss["train/generator_loss"] += gen_loss.item()

        # update generator
        self.optimizer["generator"].zero_grad()
        gen_loss.backward()
        self.optimizer["generator"].step()
        self.scheduler["generator"].step()

        if self.steps > self.config["discriminator_train_start_steps"]:
            # calculate discriminator loss
            p = self.model["discriminator"](y.unsqueeze(1)).squeeze(1)
            p_ = self.model["discriminator"](y_.unsqueeze(1).detach()).squeeze(1)
            real_loss = self.criterion["mse"](p, p.new_ones(p.size()))
            fake_loss = self.criterion["mse"](p_, p_.new_zeros(p_.size()))
            dis_loss = real_loss + fake_loss
            self.total_train_loss["train/discriminator_loss"] += dis_loss.item()

            # update discriminator
            self.optimizer["discriminator"].zero_grad()
            dis_loss.backward()
            self.optimizer["discriminator"].step()
            self.scheduler["discriminator"].step()

        # update counts
        self.steps += 1

    def _train_epoch(self):
        """Train model one epoch."""
        for train_steps_per_epoch, batch in enumerate(self.data_loader["train"], 1):
            # train one step
            self._train_step(batch)

            # check interval
            self._check_eval_interval()
            self._check_train_finish()

            # check whether training is finished
            if self.finish_train:
                return

        # update
        self.epochs += 1

    def _eval_step(self, batch):
        """Evaluate model one step."""
        # parse batch
        batch = [b.to(self.device) for b in batch]
        z, c, y, _ = batch

        # calculate generator loss
        y_ = self.model["generator"](z, c)
        p_ = self.model["discriminator"](y_)
        y, y_, p_ = y.squeeze(1), y_.squeeze(1), p_.squeeze(1)
        adv_loss = self.criterion["mse"](p_, p_.new_ones(p_.size()))
        sc_loss, mag_loss = self.criterion["stft"](y_, y)
        aux_loss = sc_loss + mag_loss
        gen_loss = aux_loss + self.config["lambda_adv"] * adv_loss

        # train discriminator
        p = self.model["discriminator"](y.unsqueeze(1)).squeeze(1)
        p_ = self.model["discriminator"](y_.unsqueeze(1)).squeeze(1)
        real_loss = self.criterion["mse"](p, p.new_ones(p.size()))
        fake_loss = self.criterion["mse"](p_, p_.new_zeros(p_.size()))
        dis_loss = real_loss + fake_loss

        # add to total eval loss
        self.total_eval_loss["eval/adversarial_loss"] += adv_loss.item()
        self.total_eval_loss["eval/generator_loss"] += gen_loss.item()
        self.total_eval_loss["eval/discriminator_loss"] += dis_loss.item()

    def _eval_epoch(self):
        """Evaluate model one epoch."""
        # change mode
        for key in self.model.keys():
            self.model[key].eval()

        # calculate loss for each batch
        for eval_steps_per_epoch, batch in enumerate(self.data_loader["dev"], 1):
            # eval one step
            self._eval_step(batch)

        # average loss
        for key in self.total_eval_loss.keys():
            self.total_eval_loss[key] /= eval_steps_per_epoch
            print(f"(steps: {self.steps}) {key} = {self.total_eval_loss[key]:.4f}.")

        # reset
        self.total_eval_loss = defaultdict(float)

        # restore mode
        for key in self.model.keys():
            self.model[key].train()

    def _check_eval_interval(self):
        if self.steps % self.config["eval_interval_steps"] == 0:
            self._eval_epoch()

    def _check_train_finish(self):
        if self.steps >= self.config["train_max_steps"]:
            self.finish_train = True


def make_batches(n, batch_size=2, frames=8, hop=16):
    return [(torch.randn(batch_size, 1, frames * hop), torch.randn(batch_size, 4, frames),
             torch.sin(torch.linspace(0, 20, frames * hop)).repeat(batch_size, 1, 1), torch.zeros(batch_size)) for _ in range(n)]


if __name__ == "__main__":
    config = {"discriminator_train_start_steps": 2, "lambda_adv": 4.0, "eval_interval_steps": 3, "train_max_steps": 6}
    model = {"generator": Generator(), "discriminator": Discriminator()}
    optimizer = {k: torch.optim.Adam(m.parameters(), lr=1e-3) for k, m in model.items()}
    scheduler = {k: torch.optim.lr_scheduler.StepLR(o, step_size=10) for k, o in optimizer.items()}
    criterion = {"stft": STFTLoss(), "mse": torch.nn.MSELoss()}
    data_loader = {"train": make_batches(6), "dev": make_batches(2)}
    trainer = Trainer(0, 0, data_loader, model, criterion, optimizer, scheduler, config)
    trainer.run()
