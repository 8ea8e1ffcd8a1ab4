import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

dim_z = 12
vocab_size = 10


class OneDirection(nn.Module):
    def __init__(self, dim_z, vocab_size=1000, **kwargs):
        super(OneDirection, self).__init__()
        self.w = nn.Parameter(torch.randn(1, dim_z))
        self.criterion = nn.MSELoss()

    def transform(self, z, y, step_sizes, **kwargs):
        interim = step_sizes * self.w
        z_transformed = z + interim
        z_transformed = z.norm() * z_transformed / z_transformed.norm()
        return z_transformed

    def compute_loss(self, current, target, batch_start, lossfile):
        return self.criterion(current, target)


def one_hot(y):
    return nn.functional.one_hot(y, vocab_size).float()


generator = nn.Sequential(nn.Linear(dim_z, 16), nn.Tanh())
assessor = nn.Linear(16, 1)
for p in generator.parameters():
    p.requires_grad = False
generator.eval()
for p in assessor.parameters():
    p.requires_grad = False
    assessor.eval()

transformation = OneDirection(dim_z, vocab_size)
optimizer = optim.Adam(transformation.parameters(), lr=0.0002)

batch_size = 4
train_alpha_a = -0.5
train_alpha_b = 0.5
num_samples = 24
zs = np.random.RandomState(0).randn(num_samples, dim_z)
ys = np.random.RandomState(1).randint(0, vocab_size, size=zs.shape[0])

# loop over data batches
for batch_start in range(0, num_samples, batch_size):
    # input batch
    s = slice(batch_start, min(num_samples, batch_start + batch_size))
    z = torch.from_numpy(zs[s]).type(torch.FloatTensor)
    y = torch.from_numpy(ys[s])
    step_sizes = (train_alpha_b - train_alpha_a) * np.random.random(size=(batch_size)) + train_alpha_a
    step_sizes_broadcast = np.repeat(step_sizes, dim_z).reshape([batch_size, dim_z])
    step_sizes_broadcast = torch.from_numpy(step_sizes_broadcast).type(torch.FloatTensor)

    # ganalyze steps
    gan_images = generator(z)
    out_scores = assessor(gan_images).float()
    target_scores = out_scores + torch.from_numpy(step_sizes).float().unsqueeze(1)

    z_transformed = transformation.transform(z, one_hot(y), step_sizes_broadcast)
    gan_images_transformed = generator(z_transformed)
    out_scores_transformed = assessor(gan_images_transformed).float()

    # compute loss
    loss = transformation.compute_loss(out_scores_transformed, target_scores, batch_start, None)

    # backwards
    loss.backward()
    optimizer.step()

    print(f"[{batch_start}/{num_samples}] loss {loss.item():.5f}")
