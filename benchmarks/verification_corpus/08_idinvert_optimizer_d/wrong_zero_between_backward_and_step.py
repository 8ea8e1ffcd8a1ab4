"""idinvert_pytorch-reproduced training_loop_encoder.py, minimized: the discriminator's
optimizer is never zeroed, so its gradients pile up across iterations (and pick up
the encoder's adversarial loss too).

Report: "optimizer_D.zero_grad() missing?" (Hsintien-Ng/idinvert_pytorch-reproduced#1).
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)

E = nn.Sequential(nn.Linear(12, 8), nn.Tanh(), nn.Linear(8, 4))
G = nn.Linear(4, 12)  # frozen generator
D = nn.Sequential(nn.Linear(12, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
for p in G.parameters():
    p.requires_grad_(False)
optimizer_E = torch.optim.Adam(E.parameters(), lr=1e-3)
optimizer_D = torch.optim.Adam(D.parameters(), lr=1e-3)

for it in range(4):
    x_real = torch.randn(6, 12)
    # encoder step
    x_rec = G(E(x_real))
    loss_pix = F.mse_loss(x_rec, x_real)
    loss_adv = F.softplus(-D(x_rec)).mean()
    loss_E = loss_pix + 0.1 * loss_adv
    optimizer_E.zero_grad()
    loss_E.backward()
    optimizer_E.step()
    # discriminator step
    x_fake = G(E(x_real)).detach()
    loss_D = F.softplus(D(x_fake)).mean() + F.softplus(-D(x_real)).mean()
    loss_D.backward()
    optimizer_D.zero_grad()
    optimizer_D.step()
    print(f"iter {it}: loss_E {loss_E.item():.4f} loss_D {loss_D.item():.4f}")
