"""scae-pytorch's mixture log-likelihood, minimized.

Report: "the loss value goes to NAN after several epochs ... the EXP operation will
cause the inf value when calculating log_prob(). So i tried the safe logsumexp()"
(mlberkeley/scae-pytorch#4). Here the values stay finite: both forms agree.
"""
import torch
import torch.nn as nn


class GaussianMixture(nn.Module):
    def __init__(self, n_components=3, dim=4):
        super().__init__()
        self.means = nn.Parameter(torch.randn(n_components, dim))
        self.mixing_logits = nn.Parameter(torch.zeros(n_components))

    def log_prob(self, x):
        diff = x[:, None, :] - self.means[None]
        component_log_prob = -0.5 * diff.pow(2).sum(-1)
        mixing_log_prob = torch.log_softmax(self.mixing_logits, 0)
        weighted = component_log_prob + mixing_log_prob
        return torch.log(torch.sum(torch.exp(weighted), 1))


torch.manual_seed(0)
model = GaussianMixture()
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
for epoch in range(3):
    x = torch.randn(16, 4)
    optimizer.zero_grad()
    loss = -model.log_prob(x).mean()
    loss.backward()
    optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
