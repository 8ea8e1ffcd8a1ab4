import torch
import torch.nn as nn


class Opt:
    lambda_GAN = 1.0
    lambda_GAN2 = 1.0
    lambda_kl = 0.01
    lambda_L1 = 10.0
    lambda_z = 0.5
    nz = 4


class BiCycleGANModel:
    def __init__(self, opt):
        self.opt = opt
        self.netG = nn.Sequential(nn.Linear(8 + opt.nz, 16), nn.Tanh(), nn.Linear(16, 8))
        self.netE = nn.Linear(8, 2 * opt.nz)
        self.netD = nn.Linear(8, 1)
        self.netD2 = nn.Linear(8, 1)
        self.criterionGAN = nn.MSELoss()
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=2e-3)
        self.optimizer_E = torch.optim.Adam(self.netE.parameters(), lr=2e-3)

    def set_requires_grad(self, nets, requires_grad=False):
        for net in nets:
            for param in net.parameters():
                param.requires_grad = requires_grad

    def set_input(self, real_A, real_B):
        self.real_A = real_A
        self.real_B = real_B

    def forward(self):
        stats = self.netE(self.real_B)
        self.mu, self.logvar = stats.chunk(2, dim=1)
        z_encoded = self.mu + torch.randn_like(self.mu) * torch.exp(0.5 * self.logvar)
        self.z_random = torch.randn(self.real_A.size(0), self.opt.nz)
        self.fake_B_encoded = self.netG(torch.cat([self.real_A, z_encoded], 1))
        self.fake_B_random = self.netG(torch.cat([self.real_A, self.z_random], 1))
        self.mu2, _ = self.netE(self.fake_B_random).chunk(2, dim=1)

    def backward_G_GAN(self, fake, netD, ll):
        pred_fake = netD(fake)
        return self.criterionGAN(pred_fake, torch.ones_like(pred_fake)) * ll

    def backward_EG(self):
        # 1, G(A) should fool D
        self.loss_G_GAN = self.backward_G_GAN(self.fake_B_encoded, self.netD, self.opt.lambda_GAN)
        self.loss_G_GAN2 = self.backward_G_GAN(self.fake_B_random, self.netD2, self.opt.lambda_GAN2)
        # 2. KL loss
        self.loss_kl = torch.sum(1 + self.logvar - self.mu.pow(2) - self.logvar.exp()) * (-0.5 * self.opt.lambda_kl)
        # 3, reconstruction |fake_B-real_B|
        self.loss_G_L1 = torch.mean(torch.abs(self.fake_B_encoded - self.real_B)) * self.opt.lambda_L1
        self.loss_G = self.loss_G_GAN + self.loss_G_GAN2 + self.loss_G_L1 + self.loss_kl
        self.loss_G.backward(retain_graph=True)

    def backward_G_alone(self):
        # 3, reconstruction |(E(G(A, z_random)))-z_random|
        if self.opt.lambda_z > 0.0:
            self.loss_z_L1 = torch.mean(torch.abs(self.mu2 - self.z_random)) * self.opt.lambda_z
            self.loss_z_L1.backward()
        else:
            self.loss_z_L1 = 0.0

    def update_G_and_E(self):
        # update G and E
        self.set_requires_grad([self.netD, self.netD2], False)
        self.optimizer_E.zero_grad()
        self.optimizer_G.zero_grad()
        self.backward_EG()

        # update G alone
        if self.opt.lambda_z > 0.0:
            self.set_requires_grad([self.netE], False)
            self.backward_G_alone()
            self.set_requires_grad([self.netE], True)

        self.optimizer_E.step()
        self.optimizer_G.step()


if __name__ == "__main__":
    model = BiCycleGANModel(Opt())
    for step in range(3):
        model.set_input(torch.randn(4, 8), torch.randn(4, 8))
        model.forward()
        model.update_G_and_E()
        print(step, f"{model.loss_G.item():.4f} {model.loss_z_L1.item():.4f}")
