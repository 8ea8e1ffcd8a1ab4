import torch
from torch import nn
from torch.optim import Adam


class Embedder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(6, 4, 3, padding=1)

    def forward(self, x, y):
        return self.conv(torch.cat([x, y], dim=1)).mean((2, 3))


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.proj = nn.Linear(4, 3)

    def forward(self, y, e):
        return torch.tanh(self.conv(y) + self.proj(e)[:, :, None, None])


class Discriminator(nn.Module):
    def __init__(self, training_videos=3):
        super().__init__()
        self.conv = nn.Conv2d(6, 4, 3, padding=1)
        self.W = nn.Parameter(torch.rand(4, training_videos))

    def forward(self, x, y, i):
        act = self.conv(torch.cat([x, y], dim=1)).mean((2, 3))
        return (act @ self.W[:, i]).unsqueeze(1), [act]


def loss_E_G(x, x_hat, r_x_hat, e_hat, W_i):
    return (x - x_hat).abs().mean() - r_x_hat.mean() + (W_i - e_hat).abs().mean()


def loss_DSC(r_x, r_x_hat):
    return (torch.relu(1 + r_x_hat) + torch.relu(1 - r_x)).mean()


E, G, D = Embedder(), Generator(), Discriminator()
optimizer_E_G = Adam(params=list(E.parameters()) + list(G.parameters()), lr=5e-5)
optimizer_D = Adam(params=D.parameters(), lr=2e-4)

for epoch in range(2):
    for batch_num, i in enumerate(range(3)):
        video = torch.randn(2, 2, 2, 3, 8, 8)
        t = video[:, :-1, ...]  # frames used to compute the embedding
        x, y = video[:, -1, 0, ...], video[:, -1, 1, ...]

        e_vectors = E(t[:, :, 0].flatten(0, 1), t[:, :, 1].flatten(0, 1)).view(2, -1, 4)
        e_hat = e_vectors.mean(dim=1)

        # Generate frame using landmarks from frame t
        x_hat = G(y, e_hat)

        # Optimize E_G and D
        r_x_hat, D_act_hat = D(x_hat, y, i)
        r_x, D_act = D(x, y, i)

        optimizer_E_G.zero_grad()
        optimizer_D.zero_grad()

        loss_EG = loss_E_G(x, x_hat, r_x_hat, e_hat, D.W[:, i])
        loss_D = loss_DSC(r_x, r_x_hat)
        loss = loss_EG + loss_D
        loss.backward()

        optimizer_E_G.step()
        optimizer_D.step()

        # Optimize D again
        x_hat = G(y, e_hat).detach()
        r_x_hat, D_act_hat = D(x_hat, y, i)
        r_x, D_act = D(x, y, i)

        optimizer_D.zero_grad()
        loss_D = loss_DSC(r_x, r_x_hat)
        loss_D.backward()
        optimizer_D.step()

        print(epoch, batch_num, round(loss_EG.item(), 4), round(loss_D.item(), 4))
