"""FactorVAE: a VAE with a total-correlation penalty and a discriminator that estimates it.

Each step first updates the VAE on its loss (which includes the discriminator's score of
`z`, kept with `retain_graph=True`), then the discriminator on `D_tc_loss`, which reuses
`D_z` from the VAE stage. `optim_VAE.step()` changed the encoder's weights in place, and
`D_z`'s graph runs through the encoder: `D_tc_loss.backward()` raises "one of the
variables needed for gradient computation has been modified by an inplace operation".
"""

import torch
import torch.nn.functional as F
from torch import nn


def permute_dims(z):
    """Shuffle each latent dimension across the batch independently (samples of q(z)'s marginals)."""
    B, _ = z.size()
    perm_z = []
    for z_j in z.split(1, 1):
        perm = torch.randperm(B)
        perm_z.append(z_j[perm])
    return torch.cat(perm_z, 1)


class FactorVAE(nn.Module):
    def __init__(self, x_dim=16, z_dim=4):
        super().__init__()
        self.z_dim = z_dim
        self.encode = nn.Sequential(nn.Linear(x_dim, 32), nn.ReLU(), nn.Linear(32, 2 * z_dim))
        self.decode = nn.Sequential(nn.Linear(z_dim, 32), nn.ReLU(), nn.Linear(32, x_dim))

    def forward(self, x, no_dec=False):
        stats = self.encode(x)
        mu, logvar = stats[:, : self.z_dim], stats[:, self.z_dim :]
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        if no_dec:
            return z.squeeze()
        return self.decode(z), mu, logvar, z.squeeze()


class Discriminator(nn.Module):
    def __init__(self, z_dim=4):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(z_dim, 32), nn.LeakyReLU(0.2), nn.Linear(32, 2))

    def forward(self, z):
        return self.net(z)


def train(steps=3, gamma=6.4, batch=32):
    torch.manual_seed(0)
    data = torch.randn(256, 16)
    VAE, D = FactorVAE(), Discriminator()
    optim_VAE = torch.optim.Adam(VAE.parameters(), lr=1e-3)
    optim_D = torch.optim.Adam(D.parameters(), lr=1e-3, betas=(0.5, 0.9))
    ones = torch.ones(batch, dtype=torch.long)
    zeros = torch.zeros(batch, dtype=torch.long)
    for step in range(steps):
        x_true1 = data[torch.randint(0, 256, (batch,))]
        x_true2 = data[torch.randint(0, 256, (batch,))]

        x_recon, mu, logvar, z = VAE(x_true1)
        vae_recon_loss = F.mse_loss(x_recon, x_true1, reduction="sum") / batch
        vae_kld = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1).mean()
        D_z = D(z)
        vae_tc_loss = (D_z[:, :1] - D_z[:, 1:]).mean()
        vae_loss = vae_recon_loss + vae_kld + gamma * vae_tc_loss

        optim_VAE.zero_grad()
        vae_loss.backward(retain_graph=True)
        optim_VAE.step()

        z_prime = VAE(x_true2, no_dec=True)
        z_pperm = permute_dims(z_prime).detach()
        D_z_pperm = D(z_pperm)
        D_tc_loss = 0.5 * (F.cross_entropy(D_z.detach(), zeros) + F.cross_entropy(D_z_pperm, ones))

        optim_D.zero_grad()
        D_tc_loss.backward()
        optim_D.step()
        print(f"step {step} vae_loss {vae_loss.item():.4f} D_tc_loss {D_tc_loss.item():.4f}")


if __name__ == "__main__":
    train()
