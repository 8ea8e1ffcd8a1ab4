import torch


def log_sum_exp(x):
    x_max = x.data.max()
    return torch.logsumexp(x - x_max, 1, keepdim=True) + x_max


conf = torch.randn(6, 4)
conf[0] -= 200
print(log_sum_exp(conf))
