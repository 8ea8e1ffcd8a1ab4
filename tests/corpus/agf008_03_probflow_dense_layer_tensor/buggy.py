import numpy as np
import torch


class Parameter(torch.nn.Module):
    """Stand-in for probflow's pf.Parameter: a normal variational posterior, sampled on call."""

    def __init__(self, shape):
        super().__init__()
        self.loc = torch.nn.Parameter(torch.randn(shape) * 0.1)
        self.raw_scale = torch.nn.Parameter(torch.full(shape, -3.0))

    def __call__(self):
        return self.loc + torch.nn.functional.softplus(self.raw_scale) * torch.randn_like(self.loc)


class ScaleParameter(Parameter):
    def __call__(self):
        return torch.nn.functional.softplus(super().__call__()) + 1e-3


class DenseLayer(torch.nn.Module):

    def __init__(self, d_in, d_out):
        super().__init__()
        self.w = Parameter([d_in, d_out])
        self.b = Parameter([1, d_out])

    def __call__(self, x):
        x = torch.tensor(x)
        return x @ self.w() + self.b()


class DenseNetwork(torch.nn.Module):

    def __init__(self, dims):
        super().__init__()
        Nl = len(dims) - 1  # number of layers
        self.layers = torch.nn.ModuleList([DenseLayer(dims[i], dims[i+1]) for i in range(Nl)])
        self.activations = (Nl-1)*[torch.nn.ReLU()] + [lambda x: x]

    def __call__(self, x):
        x = torch.tensor(x)
        for i in range(len(self.activations)):
            x = self.layers[i](x)
            x = self.activations[i](x)
        return x


class DenseRegression(torch.nn.Module):

    def __init__(self, dims):
        super().__init__()
        self.net = DenseNetwork(dims)
        self.s = ScaleParameter([1, 1])

    def __call__(self, x):
        return torch.distributions.Normal(self.net(x), self.s())


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 5)).astype('float32')
    y = (x @ rng.standard_normal((5, 1)) + 0.1 * rng.standard_normal((64, 1))).astype('float32')
    model = DenseRegression([5, 16, 1])
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for epoch in range(4):
        for i in range(0, 64, 16):
            nll = -model(x[i:i + 16]).log_prob(torch.tensor(y[i:i + 16])).mean()
            optimizer.zero_grad()
            nll.backward()
            optimizer.step()
        first = model.net.layers[0].w.loc
        print("epoch {} nll {:.4f} first-layer grad {}".format(epoch, nll.item(), first.grad is not None))
