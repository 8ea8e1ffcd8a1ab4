"""VALID / INVALID examples of `agf003_inplace_on_grad_tracked_tensor` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. manual SGD done right (the official "PyTorch: Tensors and autograd" tutorial)
    valid(
        """
import torch

w = torch.randn(3, 1, requires_grad=True)
x, y = torch.randn(64, 3), torch.randn(64, 1)
for t in range(100):
    loss = (x @ w - y).pow(2).sum()
    loss.backward()
    with torch.no_grad():
        w -= 1e-3 * w.grad
        w.grad = None
"""
    ),
    # 2. a custom optimizer's step mutates parameters in place: its whole purpose
    valid(
        """
import torch

class PlainSGD(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01):
        super().__init__(params, dict(lr=lr))

    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"])
"""
    ),
    # 3. Linear -> ReLU(inplace=True) is fine (addmm does not save its output)
    valid(
        """
import torch.nn as nn

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(inplace=True), nn.Linear(32, 1))

    def forward(self, x):
        return self.net(x)
"""
    ),
    # 4. in-place on an intermediate nothing saved is harmless
    valid(
        """
import torch
import torch.nn as nn

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        h += 1.0
        h.mul_(0.5)
        return h
"""
    ),
    # 5. EMA of weights under @torch.no_grad()
    valid(
        """
import torch

class EMA:
    def __init__(self, model, decay=0.999):
        self.model = model
        self.shadow = [p.detach().clone() for p in model.parameters()]
        self.decay = decay

    @torch.no_grad()
    def update(self):
        for s, p in zip(self.shadow, self.model.parameters()):
            s.mul_(self.decay).add_(p, alpha=1 - self.decay)
"""
    ),
    # 6. BatchNorm-style running statistics are buffers, not parameters
    valid(
        """
import torch
import torch.nn as nn

class RunningNorm(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("running_mean", torch.zeros(n))

    def forward(self, x):
        if self.training:
            self.running_mean.mul_(0.9).add_(x.mean(0), alpha=0.1)
        return x - self.running_mean
"""
    ),
    # 7. the update helper is called under no_grad from the same file
    valid(
        """
import torch

def sgd_update(model, lr):
    for p in model.parameters():
        p -= lr * p.grad

def train(model, batches, lr):
    for x, y in batches:
        torch.nn.functional.mse_loss(model(x), y).backward()
        with torch.no_grad():
            sgd_update(model, lr)
        model.zero_grad()
"""
    ),
    # 8. an initializer (name ends in `_`) and nn.init calls
    valid(
        """
import torch
import torch.nn as nn

def init_weights_(module):
    for p in module.parameters():
        p.uniform_(-0.1, 0.1)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        nn.init.zeros_(self.fc.bias)
"""
    ),
    # 9. a frozen backbone: parameters do not require grad, in-place is allowed
    valid(
        """
import torch

def shrink_backbone(backbone):
    for p in backbone.parameters():
        p.requires_grad = False
    for p in backbone.parameters():
        p.mul_(0.5)
"""
    ),
    # 10. the saved tensor is cloned first, then mutated
    valid(
        """
import torch
import torch.nn as nn

class Gate(nn.Module):
    def forward(self, x):
        g = torch.sigmoid(x)
        out = g.clone()
        out[:, 0] = 0.0
        return out * x
"""
    ),
    # 11. weight surgery under no_grad
    valid(
        """
import torch
import torch.nn as nn

model = nn.Linear(10, 2)
with torch.no_grad():
    model.weight[:, 0] = 0.0
    model.bias.fill_(0.1)
"""
    ),
    # 12. a mutated alias of a forward input that nothing saved (ResNet-style)
    valid(
        """
import torch.nn as nn
import torch.nn.functional as F

class Basic(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        out = self.bn(self.conv(x))
        out += x
        return F.relu(out, inplace=True)
"""
    ),
    # timm-style reparameterize(): detach_() freezes, it does not write the data
    valid(
        """
import torch
from torch import nn

class RepConv(nn.Module):
    def reparameterize(self):
        kernel, bias = self._fuse()
        self.reparam_conv = nn.Conv2d(8, 8, 3)
        self.reparam_conv.weight.data = kernel
        for para in self.parameters():
            para.detach_()
"""
    ),
    # 14. a same-file helper that hands back its argument: not known to be a fresh leaf
    valid(
        """
import torch

def prepare(t):
    return t

scale = prepare(torch.ones(3))
scale[0] *= 2.0
"""
    ),
    # 15. layers listed for Sequential(*layers), reordered before use: neighbours unknown
    valid(
        """
import torch.nn as nn

class Head(nn.Module):
    def __init__(self, d, p):
        super().__init__()
        layers = [nn.ReLU(), nn.Dropout(p, inplace=True)]
        layers.insert(1, nn.Linear(d, d))
        self.main = nn.Sequential(*layers)

    def forward(self, x):
        return self.main(x)
"""
    ),
    # the factory's block ends in a BatchNorm (it saves its input, not its output): `+=` on its output is safe
    valid(
        """
import torch.nn as nn


def conv_relu_bn(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.BatchNorm2d(cout))


class PosBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.stem = conv_relu_bn(cin, cout)
        self.proj = nn.Conv2d(cout, cout, 1)

    def forward(self, x, pos):
        x = self.stem(x)
        x += pos
        return self.proj(x)
"""
    ),
    # the ModuleList's items end in a convolution, which saves its input, not its output
    valid(
        """
import torch.nn as nn
import torch.nn.functional as F


def act_conv(cin, cout, inplace=True):
    return nn.Sequential(nn.ReLU(inplace=inplace), nn.Conv2d(cin, cout, 1))


class FusionHead(nn.Module):
    def __init__(self, levels, channels):
        super().__init__()
        self.fusion_level = 1
        self.laterals = nn.ModuleList()
        for _ in range(levels):
            self.laterals.append(act_conv(channels, channels, inplace=False))

    def forward(self, feats):
        x = self.laterals[self.fusion_level](feats[self.fusion_level])
        for i, feat in enumerate(feats):
            if i != self.fusion_level:
                feat = F.interpolate(feat, size=x.shape[-2:])
                x += self.laterals[i](feat)
        return x
"""
    ),
]

INVALID = [
    # 1. manual SGD over model.parameters() without no_grad
    invalid(
        """
import torch

def train(model, loader, lr=0.01):
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        for p in model.parameters():
            p -= lr * p.grad
            p.grad.zero_()
""",
        """
import torch

def train(model, loader, lr=0.01):
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        for p in model.parameters():
            with torch.no_grad():
                p -= lr * p.grad
            p.grad.zero_()
""",
    ),
    # 2. linear regression from scratch: two consecutive updates share one `with`
    invalid(
        """
import torch

w = torch.randn(3, 1, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
x, y = torch.randn(32, 3), torch.randn(32, 1)
for epoch in range(10):
    loss = ((x @ w + b - y) ** 2).mean()
    loss.backward()
    # gradient step
    w -= 0.1 * w.grad
    b -= 0.1 * b.grad
    w.grad.zero_()
    b.grad.zero_()
""",
        """
import torch

w = torch.randn(3, 1, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
x, y = torch.randn(32, 3), torch.randn(32, 1)
for epoch in range(10):
    loss = ((x @ w + b - y) ** 2).mean()
    loss.backward()
    # gradient step
    with torch.no_grad():
        w -= 0.1 * w.grad
        b -= 0.1 * b.grad
    w.grad.zero_()
    b.grad.zero_()
""",
    ),
    # 3. weight surgery on a module: a view of a leaf (`import torch as T` is reused)
    invalid(
        """
import torch as T
from torch import nn

head = nn.Linear(128, 10)
head.weight[3] = 0.0
head.bias.fill_(0.0)
""",
        """
import torch as T
from torch import nn

head = nn.Linear(128, 10)
with T.no_grad():
    head.weight[3] = 0.0
    head.bias.fill_(0.0)
""",
    ),
    # 4. a Parameter attribute filled in forward-adjacent code
    invalid(
        """
import torch
import torch.nn as nn

class Scale(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(n))

    def reset(self):
        self.gamma.fill_(1.0)  # back to identity
""",
        """
import torch
import torch.nn as nn

class Scale(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(n))

    def reset(self):
        with torch.no_grad():
            self.gamma.fill_(1.0)  # back to identity
""",
    ),
    # 5. sigmoid saves its output; scaling it in place breaks backward
    invalid(
        """
import torch
import torch.nn as nn

class Attention(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.score = nn.Linear(d, 1)

    def forward(self, x):
        a = torch.sigmoid(self.score(x))
        a.mul_(2.0)
        return a * x
""",
        """
import torch
import torch.nn as nn

class Attention(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.score = nn.Linear(d, 1)

    def forward(self, x):
        a = torch.sigmoid(self.score(x))
        a = a.mul(2.0)
        return a * x
""",
    ),
    # 6. `+=` on a tensor a Linear layer saved as its input
    invalid(
        """
import torch
import torch.nn as nn

class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head_a = nn.Linear(8, 2)
        self.head_b = nn.Linear(8, 2)

    def forward(self, x):
        h = self.body(x)
        a = self.head_a(h)
        h += 1.0 - 0.5
        return a, self.head_b(h)
""",
        """
import torch
import torch.nn as nn

class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head_a = nn.Linear(8, 2)
        self.head_b = nn.Linear(8, 2)

    def forward(self, x):
        h = self.body(x)
        a = self.head_a(h)
        h = h + (1.0 - 0.5)
        return a, self.head_b(h)
""",
    ),
    # 7. masking softmax scores by index assignment: clone first
    invalid(
        """
import torch
import torch.nn as nn

class Pool(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x, mask):
        w = torch.softmax(self.proj(x), dim=-1)
        w[mask] = 0.0
        return (w * x).sum(1)
""",
        """
import torch
import torch.nn as nn

class Pool(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = nn.Linear(d, d)

    def forward(self, x, mask):
        w = torch.softmax(self.proj(x), dim=-1)
        w = w.clone()
        w[mask] = 0.0
        return (w * x).sum(1)
""",
    ),
    # 8. Sigmoid -> ReLU(inplace=True) in a Sequential
    invalid(
        """
import torch.nn as nn

gate = nn.Sequential(nn.Linear(16, 16), nn.Sigmoid(), nn.ReLU(inplace=True))
""",
        """
import torch.nn as nn

gate = nn.Sequential(nn.Linear(16, 16), nn.Sigmoid(), nn.ReLU())
""",
    ),
    # 9. F.relu(..., inplace=True) on a tanh output
    invalid(
        """
import torch
import torch.nn as nn
import torch.nn.functional as F

class Cell(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = torch.tanh(self.fc(x))
        F.relu(h, inplace=True)
        return h
""",
        """
import torch
import torch.nn as nn
import torch.nn.functional as F

class Cell(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        h = torch.tanh(self.fc(x))
        h = F.relu(h)
        return h
""",
    ),
    # 10. zero_ on a tensor saved by `x ** 2` -> zeros_like
    invalid(
        """
import torch

x = torch.randn(5, requires_grad=True)
y = x * 3
z = (y ** 2).sum()
y.zero_()
z.backward()
""",
        """
import torch

x = torch.randn(5, requires_grad=True)
y = x * 3
z = (y ** 2).sum()
y = torch.zeros_like(y)
z.backward()
""",
    ),
    # 11. relu saves its result; adding the shortcut in place after it breaks backward
    invalid(
        """
import torch.nn as nn
import torch.nn.functional as F

class Basic(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        out = F.relu(self.bn(self.conv(x)), inplace=True)
        out += x
        return out
""",
        """
import torch.nn as nn
import torch.nn.functional as F

class Basic(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        out = F.relu(self.bn(self.conv(x)), inplace=True)
        out = out + x
        return out
""",
    ),
    # 12. the saved tensor has another name: report only
    invalid(
        """
import torch
import torch.nn as nn

class Res(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = torch.tanh(self.fc(x))
        skip = h
        h.add_(1.0)
        return h + skip
"""
    ),
    # 13. an in-place op on a requires_grad leaf with no sign of intent: report only
    invalid(
        """
import torch

x = torch.ones(3, requires_grad=True)
x.add_(1.0)
y = (x * x).sum()
y.backward()
"""
    ),
    # 14. a weight made by a same-file helper that returns `.requires_grad_()`, one entry scaled in place
    invalid(
        """
import torch

def init_params(size, std=1.0):
    return (torch.randn(size) * std).requires_grad_()

weights = init_params((784, 1))
bias = init_params(1)
weights[0] *= 1.0001
""",
        """
import torch

def init_params(size, std=1.0):
    return (torch.randn(size) * std).requires_grad_()

weights = init_params((784, 1))
bias = init_params(1)
with torch.no_grad():
    weights[0] *= 1.0001
""",
    ),
    # 15. Dropout(inplace=True) after ReLU, the layers in a list handed to Sequential(*layers)
    invalid(
        """
import torch.nn as nn

class Classifier(nn.Module):
    def __init__(self, in_dim, hid_dim, out_dim, dropout):
        super().__init__()
        layers = [
            nn.Linear(in_dim, hid_dim),
            nn.ReLU(),
            nn.Dropout(dropout, inplace=True),
            nn.Linear(hid_dim, out_dim),
        ]
        self.main = nn.Sequential(*layers)

    def forward(self, x):
        return self.main(x)
""",
        """
import torch.nn as nn

class Classifier(nn.Module):
    def __init__(self, in_dim, hid_dim, out_dim, dropout):
        super().__init__()
        layers = [
            nn.Linear(in_dim, hid_dim),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hid_dim, out_dim),
        ]
        self.main = nn.Sequential(*layers)

    def forward(self, x):
        return self.main(x)
""",
    ),
    # a same-file factory builds conv -> BN -> ReLU; the ReLU saved the block's output,
    # which `+=` then changes (GANet's position embedding)
    invalid(
        """
import torch.nn as nn


def conv_bn_relu(cin, cout, kernel_size=3, inplace=True):
    return nn.Sequential(nn.Conv2d(cin, cout, kernel_size, padding=1, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=inplace))


class PosAttention(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.stem = conv_bn_relu(cin, cout, inplace=False)
        self.proj = nn.Conv2d(cout, cout, 1)

    def forward(self, x, pos=None):
        x = self.stem(x)
        if pos is not None:
            x += pos
        return self.proj(x)
""",
        """
import torch.nn as nn


def conv_bn_relu(cin, cout, kernel_size=3, inplace=True):
    return nn.Sequential(nn.Conv2d(cin, cout, kernel_size, padding=1, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=inplace))


class PosAttention(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.stem = conv_bn_relu(cin, cout, inplace=False)
        self.proj = nn.Conv2d(cout, cout, 1)

    def forward(self, x, pos=None):
        x = self.stem(x)
        if pos is not None:
            x = x + pos
        return self.proj(x)
""",
    ),
    # every item of a ModuleList built by a same-file factory ends in a ReLU that saved its
    # output; the sum of the other levels goes into it in place (mmdetection's semantic head)
    invalid(
        """
import torch.nn as nn
import torch.nn.functional as F


def conv_act(cin, cout, inplace=True):
    return nn.Sequential(nn.Conv2d(cin, cout, 1), nn.ReLU(inplace=inplace))


class FusionHead(nn.Module):
    def __init__(self, levels, channels):
        super().__init__()
        self.fusion_level = 1
        self.laterals = nn.ModuleList()
        for _ in range(levels):
            self.laterals.append(conv_act(channels, channels, inplace=False))

    def forward(self, feats):
        x = self.laterals[self.fusion_level](feats[self.fusion_level])
        for i, feat in enumerate(feats):
            if i != self.fusion_level:
                feat = F.interpolate(feat, size=x.shape[-2:])
                x += self.laterals[i](feat)
        return x
""",
        """
import torch.nn as nn
import torch.nn.functional as F


def conv_act(cin, cout, inplace=True):
    return nn.Sequential(nn.Conv2d(cin, cout, 1), nn.ReLU(inplace=inplace))


class FusionHead(nn.Module):
    def __init__(self, levels, channels):
        super().__init__()
        self.fusion_level = 1
        self.laterals = nn.ModuleList()
        for _ in range(levels):
            self.laterals.append(conv_act(channels, channels, inplace=False))

    def forward(self, feats):
        x = self.laterals[self.fusion_level](feats[self.fusion_level])
        for i, feat in enumerate(feats):
            if i != self.fusion_level:
                feat = F.interpolate(feat, size=x.shape[-2:])
                x = x + self.laterals[i](feat)
        return x
""",
    ),
]
