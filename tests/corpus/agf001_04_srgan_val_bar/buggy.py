import math

import torch
import torch.nn as nn

UPSCALE_FACTOR = 2
NUM_EPOCHS = 2


class Generator(nn.Module):
    def __init__(self, scale_factor):
        super().__init__()
        self.block1 = nn.Sequential(nn.Conv2d(3, 8, kernel_size=3, padding=1), nn.PReLU())
        self.upsample = nn.Sequential(nn.Conv2d(8, 3 * scale_factor**2, kernel_size=3, padding=1), nn.PixelShuffle(scale_factor))

    def forward(self, x):
        return (torch.tanh(self.upsample(self.block1(x))) + 1) / 2


if __name__ == "__main__":
    train_loader = [(torch.rand(2, 3, 8, 8), torch.rand(2, 3, 16, 16)) for _ in range(2)]
    val_loader = [(torch.rand(1, 3, 8, 8), torch.rand(1, 3, 16, 16), torch.rand(1, 3, 16, 16)) for _ in range(3)]
    netG = Generator(UPSCALE_FACTOR)
    optimizerG = torch.optim.Adam(netG.parameters())
    mse_loss = nn.MSELoss()

    for epoch in range(1, NUM_EPOCHS + 1):
        netG.train()
        for data, target in train_loader:
            netG.zero_grad()
            fake_img = netG(data)
            g_loss = mse_loss(fake_img, target)
            g_loss.backward()
            optimizerG.step()

        netG.eval()
        valing_results = {"mse": 0, "psnr": 0, "batch_sizes": 0}
        val_images = []
        for val_lr, val_hr_restore, val_hr in val_loader:
            batch_size = val_lr.size(0)
            valing_results["batch_sizes"] += batch_size
            lr = val_lr
            hr = val_hr
            sr = netG(lr)

            batch_mse = ((sr - hr) ** 2).mean()
            valing_results["mse"] += batch_mse * batch_size
            valing_results["psnr"] = 10 * math.log10(1 / (valing_results["mse"] / valing_results["batch_sizes"]))
            val_images.extend([val_hr_restore.squeeze(0), hr.squeeze(0), sr.squeeze(0)])
        print(f"epoch {epoch} psnr={valing_results['psnr']:.4f} images={len(val_images)}")
