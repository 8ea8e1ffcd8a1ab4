"""PACT module.py, minimized: ActFn (clipped, quantized activation with a learnable
clip level alpha and a bit width k) returns no gradient for k.

Report and code: KwangHoonAn/PACT#4 (ActFn's straight-through backward returns
`dLdy_q * x_range.float(), grad_alpha, None`); here the trailing None for the int k
is missing, which raises "returned an incorrect number of gradients (expected 3, got 2)".
"""
import torch
from torch import nn
from torch.autograd import Function

torch.manual_seed(0)


class ActFn(Function):
    @staticmethod
    def forward(ctx, x, alpha, k):
        ctx.save_for_backward(x, alpha)
        y = torch.clamp(x, min=0, max=alpha.item())
        scale = (2**k - 1) / alpha
        y_q = torch.round(y * scale) / scale
        return y_q

    @staticmethod
    def backward(ctx, dLdy_q):
        x, alpha = ctx.saved_tensors
        lower_bound = x < 0
        upper_bound = x > alpha
        x_range = ~(lower_bound | upper_bound)
        grad_alpha = torch.sum(dLdy_q * torch.ge(x, alpha).float()).view(-1)
        return dLdy_q * x_range.float(), grad_alpha, None


class PACTNet(nn.Module):
    def __init__(self, k=4):
        super().__init__()
        self.k = k
        self.fc1 = nn.Linear(8, 16)
        self.alpha = nn.Parameter(torch.tensor([2.0]))
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(ActFn.apply(self.fc1(x), self.alpha, self.k))


if __name__ == "__main__":
    model = PACTNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(6, 8), torch.randint(0, 3, (6,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(step, loss.item(), model.alpha.item())
