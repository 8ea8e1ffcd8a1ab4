"""jcjohnson/pytorch-examples two_layer_net_autograd.py, minimized: the manual SGD
update with the gradient-zeroing lines removed (they raised AttributeError on the
first iteration, when .grad is still None), so gradients now accumulate.

Report: jcjohnson/pytorch-examples#4 (the maintainer's fix zeroes after the update).
"""
import torch

torch.manual_seed(0)
N, D_in, H, D_out = 16, 10, 12, 3
x = torch.randn(N, D_in)
y = torch.randn(N, D_out)
w1 = torch.randn(D_in, H, requires_grad=True)
w2 = torch.randn(H, D_out, requires_grad=True)
learning_rate = 1e-3

for t in range(20):
    y_pred = x.mm(w1).clamp(min=0).mm(w2)
    loss = (y_pred - y).pow(2).sum()
    loss.backward()
    with torch.no_grad():
        w1.grad.zero_()
        w2.grad.zero_()
        w1 -= learning_rate * w1.grad
        w2 -= learning_rate * w2.grad

print("final loss", loss.item())
