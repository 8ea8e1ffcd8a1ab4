import torch


def log_prob(component_log_prob, mixing_log_prob):
    weighted = component_log_prob + mixing_log_prob
    return torch.log(torch.sum(torch.exp(weighted), dim=1))


print(log_prob(torch.randn(4, 3), torch.log_softmax(torch.zeros(3), 0)))
