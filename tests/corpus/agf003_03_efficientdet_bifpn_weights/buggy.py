import torch
import torch.nn.functional as F
from torch import nn


class Swish(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)


class BiFPN(nn.Module):
    def __init__(self, num_channels, epsilon=1e-4):
        super(BiFPN, self).__init__()
        self.epsilon = epsilon
        self.conv6_up = nn.Conv2d(num_channels, num_channels, 3, padding=1)
        self.swish = Swish()
        # Weight
        self.p6_w1 = nn.Parameter(torch.ones(2, dtype=torch.float32), requires_grad=True)
        self.p6_w1_relu = nn.ReLU()

    def forward(self, inputs):
        p6_in, p7_in = inputs
        # Weights for P6_0 and P7_0 to P6_1
        p6_w1 = self.p6_w1_relu(self.p6_w1)
        weight = p6_w1 / (torch.sum(p6_w1, dim=0) + self.epsilon)
        # Connections for P6_0 and P7_0 to P6_1 respectively
        p6_up = self.conv6_up(self.swish(weight[0] * p6_in + weight[1] * F.interpolate(p7_in, scale_factor=2)))
        return p6_up


if __name__ == "__main__":
    bifpn = BiFPN(4)
    out = bifpn((torch.randn(1, 4, 8, 8), torch.randn(1, 4, 4, 4)))
    out.mean().backward()
    print(round(out.mean().item(), 4), [round(v, 4) for v in bifpn.p6_w1.grad.tolist()])
