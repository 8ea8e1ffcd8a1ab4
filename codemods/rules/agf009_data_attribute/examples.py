"""VALID / INVALID examples of `agf009_data_attribute` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. `dataset.data` / `batch.data` are not tensors autograd tracks
    valid(
        """
import torch

def describe(dataset, loader):
    print(dataset.data.shape)
    for batch in loader:
        print(batch.data)
"""
    ),
    # 2. PackedSequence.data from an LSTM over packed input
    valid(
        """
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence

class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16)
        self.out = nn.Linear(16, 5)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths)
        out, _ = self.lstm(packed)
        return self.out(out.data)
"""
    ),
    # 3. `.grad.data` is not tracked (the gradient itself)
    valid(
        """
import torch

def clip(model, max_norm):
    for p in model.parameters():
        p.grad.data.clamp_(-max_norm, max_norm)
"""
    ),
    # 4. a custom optimizer written in the old style: its job is to mutate parameters
    valid(
        """
import torch
from torch.optim import Optimizer

class SignSGD(Optimizer):
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.data.add_(torch.sign(p.grad.data), alpha=-group["lr"])
"""
    ),
    # 5. already idiomatic: no_grad and detach
    valid(
        """
import torch

def step(model, lr, output):
    with torch.no_grad():
        for p in model.parameters():
            p.add_(p.grad, alpha=-lr)
    return output.detach().argmax(1)
"""
    ),
    # 6. reads under no_grad are harmless
    valid(
        """
import torch

@torch.no_grad()
def evaluate(model, loader):
    correct = 0
    for x, y in loader:
        output = model(x)
        correct += output.data.max(1)[1].eq(y).sum().item()
    return correct
"""
    ),
    # 7. numpy arrays have a `.data` buffer
    valid(
        """
import numpy as np
import torch

arr = np.zeros(4)
view = memoryview(arr.data)
t = torch.from_numpy(arr)
"""
    ),
    # 8. an initializer named with a trailing underscore
    valid(
        """
import torch
import torch.nn as nn

def reset_(module):
    for p in module.parameters():
        p.data.zero_()
"""
    ),
    # 9. a Dataset stores its samples in `self.data`
    valid(
        """
import torch
from torch.utils.data import Dataset

class Points(Dataset):
    def __init__(self, n):
        self.data = torch.randn(n, 2)

    def __getitem__(self, i):
        return self.data[i]
"""
    ),
    # (formerly INVALID 5) a training step already under no_grad: autograd records
    # nothing there, and an in-place update under no_grad is left alone (facts, 4)
    valid(
        """
import torch

def train_step(model, loss, lr):
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p.data.sub_(lr * p.grad)
"""
    ),
]

VALID += [
    # 10. Module._apply-style storage swap: casting a parameter in place of itself (torch.nn.cpp)
    valid(
        """
import torch

class Wrapper(torch.nn.Module):
    def _apply(self, fn, recurse=True):
        for param in self.parameters():
            param.data = fn(param.data)
        return self
"""
    ),
    # 11. keeping a storage alias on an object on purpose (DDP/FSDP mixed precision)
    valid(
        """
import torch

def attach_full_precision(module):
    for param in module.parameters():
        param._fp_param = param.data
"""
    ),
]

VALID += [
    # 12. (formerly INVALID 3) DCGAN weights_init passed to .apply: initialisation, no graph anywhere
    valid(
        """
import torch.nn as nn

def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        m.bias.data.fill_(0)

netG = nn.Sequential(nn.ConvTranspose2d(100, 64, 4), nn.BatchNorm2d(64))
netG.apply(weights_init)
"""
    ),
    # 13. (formerly INVALID 4) a method that only edits the module's own weights: no forward, no backward
    valid(
        """
import torch
import torch.nn as nn

class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(2, 16)
        self.fc2 = nn.Linear(16, 1)

    def clip_weights(self, c):
        self.fc1.weight.data.clamp_(-c, c)
        self.fc2.weight.data.clamp_(-c, c)
"""
    ),
    # 14. (formerly INVALID 5) a parameter edit under no_grad outside any training step
    valid(
        """
import torch

def shrink(model):
    with torch.no_grad():
        for p in model.parameters():
            p.data.mul_(0.9)
"""
    ),
    # 15. (formerly INVALID 8/9) a script that never runs autograd: snapshots and weight surgery
    valid(
        """
import torch
import torch.nn as nn

layer = nn.Linear(3, 3)
before = layer.weight.data.clone()
snapshot = layer.weight.data
emb = nn.Embedding(100, 16)
emb.weight.data = torch.randn(100, 16)
"""
    ),
    # 16. timm LeViT/RepViT-style conv+BN fusion under no_grad: builds a new module
    valid(
        """
import torch
import torch.nn as nn

class ConvNorm(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.linear = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    @torch.no_grad()
    def fuse(self):
        c, bn = self.linear, self.bn
        w = bn.weight / (bn.running_var + bn.eps) ** 0.5
        w = c.weight * w[:, None, None, None]
        b = bn.bias - bn.running_mean * bn.weight / (bn.running_var + bn.eps) ** 0.5
        m = nn.Conv2d(w.size(1), w.size(0), w.shape[2:])
        m.weight.data.copy_(w)
        m.bias.data.copy_(b)
        return m
"""
    ),
    # 17. timm FastViT/MobileOne-style re-parameterisation: storage replaced after training
    valid(
        """
import torch
import torch.nn as nn

class MobileOneBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.reparam_conv = nn.Conv2d(cin, cout, 3, padding=1)

    def reparameterize(self):
        std = (self.bn.running_var + self.bn.eps).sqrt()
        kernel = self.conv.weight * (self.bn.weight / std).reshape(-1, 1, 1, 1)
        bias = self.bn.bias - self.bn.running_mean * self.bn.weight / std
        self.reparam_conv.weight.data = kernel
        self.reparam_conv.bias.data = bias
        self.__delattr__("conv")
        self.__delattr__("bn")

    def forward(self, x):
        return self.reparam_conv(x)
"""
    ),
    # 18. timm DLA/Xception/TResNet-style init loops in `__init__` and in an init method
    valid(
        """
import math
import torch.nn as nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                m.weight.data.normal_(0, math.sqrt(2.0 / n))
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()

    def init_weights(self):
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()
"""
    ),
    # 19. timm/torchvision-style module converter: copies weights into a new module
    valid(
        """
import torch
import torch.nn as nn

def freeze_batch_norm(module):
    res = module
    if isinstance(module, nn.BatchNorm2d):
        res = nn.BatchNorm2d(module.num_features)
        if module.affine:
            res.weight.data = module.weight.data.clone().detach()
            res.bias.data = module.bias.data.clone().detach()
    else:
        for name, child in module.named_children():
            res.add_module(name, freeze_batch_norm(child))
    return res
"""
    ),
    # 20. torchvision video_utils: a decoder's *method* is not a forward pass; FrameBatch.data
    valid(
        """
import torch

def get_clip(torchcodec, video_path, start_idx, end_idx):
    decoder = torchcodec.decoders.VideoDecoder(video_path)
    video = decoder.get_frames_at(indices=list(range(start_idx, end_idx + 1))).data
    audio_decoder = torchcodec.decoders.AudioDecoder(video_path)
    audio_samples = audio_decoder.get_samples_played_in_range(start_seconds=0.0, stop_seconds=1.0)
    audio = audio_samples.data
    return video, audio
"""
    ),
]

VALID += [
    # 21. transformers UDOP: a bias table widened in `forward` by writing into a module built
    # just above, copying from the old one; no graph can have saved a parameter that is new
    valid(
        """
import torch.nn as nn

class RelativePositionBiasBase(nn.Module):
    def __init__(self, num_buckets=32, num_heads=8, prefix_bucket=True, expand=True):
        super().__init__()
        self.relative_attention_num_buckets = num_buckets
        self.num_heads = num_heads
        self.prefix_bucket = prefix_bucket
        self.expand = expand
        self.relative_attention_bias = nn.Embedding(num_buckets, num_heads)

    def forward(self, attention_mask=None, bbox=None):
        if self.expand and self.prefix_bucket:
            new_bias = nn.Embedding(self.relative_attention_num_buckets + 2, self.num_heads)
            new_bias.weight.data[: self.relative_attention_num_buckets] = self.relative_attention_bias.weight.data
            new_bias.weight.data[self.relative_attention_num_buckets :] = 0.1
            self.relative_attention_bias = new_bias
            self.expand = False
        return self.relative_attention_bias(bbox)
"""
    ),
    # issue 8 (pytorch/examples legacy/snli/train.py): pretrained vectors copied in
    # through `.data` in the script's set-up, before any forward or backward has run
    valid(
        """
import torch
import torch.nn as nn
import torch.optim as O


class SNLIClassifier(nn.Module):
    def __init__(self, n_embed, d_embed, d_out):
        super().__init__()
        self.embed = nn.Embedding(n_embed, d_embed)
        self.out = nn.Linear(d_embed, d_out)

    def forward(self, premise):
        return self.out(self.embed(premise).mean(0))


vectors = torch.randn(100, 16)
train_iter = [(torch.randint(0, 100, (7, 4)), torch.randint(0, 3, (4,))) for _ in range(3)]
word_vectors = True

model = SNLIClassifier(100, 16, 3)
if word_vectors:
    model.embed.weight.data.copy_(vectors)

criterion = nn.CrossEntropyLoss()
opt = O.Adam(model.parameters(), lr=0.001)
for epoch in range(2):
    for premise, label in train_iter:
        opt.zero_grad()
        answer = model(premise)
        loss = criterion(answer, label)
        loss.backward()
        opt.step()
"""
    ),
    # numbers made from a parameter's `.data` (repr, a float getter) and an initialiser: nothing leaves with a graph
    valid(
        """
import torch
from torch import nn


class ScaledLinear(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        return self.linear(x) * self.scale

    def extra_repr(self):
        return f"scale={self.scale.data.item():.3f}"

    def scale_value(self):
        return self.scale.data.item()

    def reset_parameters_(self):
        self.scale.data.fill_(1.0)
        return self.scale.data
"""
    ),
]


VALID += [
    # `add_module`-registered head, but the `.data` read is under no_grad: no graph to break
    valid(
        """
import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, vocab, dim, classes):
        super().__init__()
        self.add_module("embed", nn.Embedding(vocab, dim))
        self.add_module("head", nn.Sequential(nn.Linear(dim, classes)))

    def forward(self, tokens):
        return self.head(self.embed(tokens).mean(1))

    def predict(self, tokens):
        with torch.no_grad():
            scores = self.head(self.embed(tokens).mean(1))
            return scores.data.argmax(1)
"""
    ),
]

INVALID = [
    # 1. manual SGD through .data in a parameters() loop (reads `.grad`: a training step)
    invalid(
        """
import torch

def sgd_step(model, lr):
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
""",
        """
import torch

def sgd_step(model, lr):
    for p in model.parameters():
        with torch.no_grad():
            p.add_(p.grad, alpha=-lr)
""",
    ),
    # 2. the old MNIST example: accuracy from output.data
    invalid(
        """
import torch.nn.functional as F

def train(model, loader, optimizer):
    for data, target in loader:
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        pred = output.data.max(1)[1]
        print(pred.eq(target).sum().item())
""",
        """
import torch.nn.functional as F

def train(model, loader, optimizer):
    for data, target in loader:
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        pred = output.detach().max(1)[1]
        print(pred.eq(target).sum().item())
""",
    ),
    # 3. re-initialising a head inside the training loop: nn.init on `.data` and a fill through `.data`
    invalid(
        """
import torch
import torch.nn as nn
import torch.nn.functional as F

def train(model, classifier, loader, optimizer):
    for step, (x, y) in enumerate(loader):
        loss = F.cross_entropy(classifier(model(x)), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            nn.init.normal_(classifier.weight.data, 0.0, 0.01)
            classifier.bias.data.fill_(0)
""",
        """
import torch
import torch.nn as nn
import torch.nn.functional as F

def train(model, classifier, loader, optimizer):
    for step, (x, y) in enumerate(loader):
        loss = F.cross_entropy(classifier(model(x)), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            nn.init.normal_(classifier.weight, 0.0, 0.01)
            with torch.no_grad():
                classifier.bias.fill_(0)
""",
    ),
    # 4. WGAN weight clipping in the critic's training step: consecutive statements share one `with`
    invalid(
        """
import torch

def critic_step(critic, real, fake, optimizer, c=0.01):
    loss = critic(fake).mean() - critic(real).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    critic.fc1.weight.data.clamp_(-c, c)
    critic.fc2.weight.data.clamp_(-c, c)
""",
        """
import torch

def critic_step(critic, real, fake, optimizer, c=0.01):
    loss = critic(fake).mean() - critic(real).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        critic.fc1.weight.clamp_(-c, c)
        critic.fc2.weight.clamp_(-c, c)
""",
    ),
    # 6. a running loss from `loss.data` (`import torch as T`)
    invalid(
        """
import torch as T
import torch.nn as nn

model = nn.Linear(4, 1)
criterion = nn.MSELoss()
running = 0.0
for _ in range(3):
    loss = criterion(model(T.randn(8, 4)), T.randn(8, 1))
    loss.backward()
    running += loss.data.item()
""",
        """
import torch as T
import torch.nn as nn

model = nn.Linear(4, 1)
criterion = nn.MSELoss()
running = 0.0
for _ in range(3):
    loss = criterion(model(T.randn(8, 4)), T.randn(8, 1))
    loss.backward()
    running += loss.detach().item()
""",
    ),
    # 7. manual SGD on requires_grad tensors with `-=` through `.data`
    invalid(
        """
import torch

w = torch.randn(3, requires_grad=True)
for _ in range(5):
    loss = (w ** 2).sum()
    loss.backward()
    w.data -= 0.1 * w.grad.data
    w.grad.data.zero_()
""",
        """
import torch

w = torch.randn(3, requires_grad=True)
for _ in range(5):
    loss = (w ** 2).sum()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad.data
    w.grad.data.zero_()
""",
    ),
    # 8. a snapshot of the weights around a training step, bound to a name: unsafe fix, still `.detach()`
    invalid(
        """
import torch
import torch.nn as nn

layer = nn.Linear(3, 3)
optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
before = layer.weight.data.clone()
layer(torch.randn(2, 3)).sum().backward()
optimizer.step()
snapshot = layer.weight.data
""",
        """
import torch
import torch.nn as nn

layer = nn.Linear(3, 3)
optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
before = layer.weight.detach().clone()
layer(torch.randn(2, 3)).sum().backward()
optimizer.step()
snapshot = layer.weight.detach()
""",
    ),
    # 9. `leaf.data = <computed>` in a training loop (max-norm embeddings): copy_ under
    #    no_grad, unsafe (a run shows whether the shapes match)
    invalid(
        """
import torch
import torch.nn as nn
import torch.nn.functional as F

emb = nn.Embedding(100, 16)
optimizer = torch.optim.Adam(emb.parameters())
for ids in torch.randint(0, 100, (5, 8)):
    loss = emb(ids).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    emb.weight.data = F.normalize(emb.weight.detach(), dim=1)
""",
        """
import torch
import torch.nn as nn
import torch.nn.functional as F

emb = nn.Embedding(100, 16)
optimizer = torch.optim.Adam(emb.parameters())
for ids in torch.randint(0, 100, (5, 8)):
    loss = emb(ids).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        emb.weight.copy_(F.normalize(emb.weight.detach(), dim=1))
""",
    ),
    # 10. a straight-through rounding through `.data` of an intermediate: report only
    invalid(
        """
import torch
import torch.nn as nn

class Quant(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = torch.tanh(self.fc(x))
        h.data.round_()
        return h
"""
    ),
    # 11. a leaf changed through `.data` after an op saved it, before backward: silently wrong gradients
    invalid(
        """
import torch

w = torch.randn(3, requires_grad=True)
y = (w ** 2).sum()
w.data.mul_(0.5)
""",
        """
import torch

w = torch.randn(3, requires_grad=True)
y = (w ** 2).sum()
with torch.no_grad():
    w.mul_(0.5)
""",
    ),
    # 11. an activation autograd saved, scaled through `.data`: out of place, unsafe
    invalid(
        """
import torch
import torch.nn as nn

class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        gate = torch.sigmoid(self.fc(x))
        gate.data.mul_(2).clamp_(max=1.5)
        return gate * x
""",
        """
import torch
import torch.nn as nn

class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        gate = torch.sigmoid(self.fc(x))
        gate = gate.mul(2).clamp(max=1.5)
        return gate * x
""",
    ),
    # issue 8: the same copy after a first training loop ran backward is a finding
    invalid(
        """
import torch
import torch.nn as nn
import torch.optim as O


class SNLIClassifier(nn.Module):
    def __init__(self, n_embed, d_embed, d_out):
        super().__init__()
        self.embed = nn.Embedding(n_embed, d_embed)
        self.out = nn.Linear(d_embed, d_out)

    def forward(self, premise):
        return self.out(self.embed(premise).mean(0))


vectors = torch.randn(100, 16)
train_iter = [(torch.randint(0, 100, (7, 4)), torch.randint(0, 3, (4,))) for _ in range(3)]
word_vectors = True

model = SNLIClassifier(100, 16, 3)
criterion = nn.CrossEntropyLoss()
opt = O.Adam(model.parameters(), lr=0.001)
for epoch in range(2):
    for premise, label in train_iter:
        opt.zero_grad()
        criterion(model(premise), label).backward()
        opt.step()
if word_vectors:
    model.embed.weight.data.copy_(vectors)

for epoch in range(2):
    for premise, label in train_iter:
        opt.zero_grad()
        answer = model(premise)
        loss = criterion(answer, label)
        loss.backward()
        opt.step()
""",
        """
import torch
import torch.nn as nn
import torch.optim as O


class SNLIClassifier(nn.Module):
    def __init__(self, n_embed, d_embed, d_out):
        super().__init__()
        self.embed = nn.Embedding(n_embed, d_embed)
        self.out = nn.Linear(d_embed, d_out)

    def forward(self, premise):
        return self.out(self.embed(premise).mean(0))


vectors = torch.randn(100, 16)
train_iter = [(torch.randint(0, 100, (7, 4)), torch.randint(0, 3, (4,))) for _ in range(3)]
word_vectors = True

model = SNLIClassifier(100, 16, 3)
criterion = nn.CrossEntropyLoss()
opt = O.Adam(model.parameters(), lr=0.001)
for epoch in range(2):
    for premise, label in train_iter:
        opt.zero_grad()
        criterion(model(premise), label).backward()
        opt.step()
if word_vectors:
    with torch.no_grad():
        model.embed.weight.copy_(vectors)

for epoch in range(2):
    for premise, label in train_iter:
        opt.zero_grad()
        answer = model(premise)
        loss = criterion(answer, label)
        loss.backward()
        opt.step()
""",
    ),
    # a module getter hands back its parameters (and functions of them) through `.data`, in one-line
    # `if` bodies (arthur-pe/slicetca#3's shape); the rule cannot see the intent of `detach=False`
    invalid(
        """
import torch
from torch import nn


class LowRankFactors(nn.Module):
    def __init__(self, shapes, rank):
        super().__init__()
        self.factors = nn.ParameterList([nn.Parameter(torch.randn(rank, n)) for n in shapes])

    def forward(self):
        return torch.einsum("ri,rj->ij", self.factors[0], self.factors[1])

    def factor_list(self, detach=False):
        out = []
        for k in range(len(self.factors)):
            if detach: out.append(self.factors[k].data.detach())
            else: out.append(torch.relu(self.factors[k]).data)
        return out
""",
        """
import torch
from torch import nn


class LowRankFactors(nn.Module):
    def __init__(self, shapes, rank):
        super().__init__()
        self.factors = nn.ParameterList([nn.Parameter(torch.randn(rank, n)) for n in shapes])

    def forward(self):
        return torch.einsum("ri,rj->ij", self.factors[0], self.factors[1])

    def factor_list(self, detach=False):
        out = []
        for k in range(len(self.factors)):
            if detach: out.append(self.factors[k].detach())
            else: out.append(torch.relu(self.factors[k]).detach())
        return out
""",
    ),
    # 3. submodules registered with `add_module` (TorchMoji): the head's output is tracked,
    #    and `.data` in `forward` hands the caller a tensor cut from the graph
    invalid(
        """
import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, vocab, dim, classes):
        super().__init__()
        self.add_module("embed", nn.Embedding(vocab, dim))
        self.add_module("head", nn.Sequential(nn.Linear(dim, classes)))

    def forward(self, tokens, as_tensor=True):
        scores = self.head(self.embed(tokens).mean(1))
        if as_tensor:
            scores = scores.data
        return scores
""",
        """
import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, vocab, dim, classes):
        super().__init__()
        self.add_module("embed", nn.Embedding(vocab, dim))
        self.add_module("head", nn.Sequential(nn.Linear(dim, classes)))

    def forward(self, tokens, as_tensor=True):
        scores = self.head(self.embed(tokens).mean(1))
        if as_tensor:
            scores = scores.detach()
        return scores
""",
    ),
]

# `.data` in a same-file helper whose parameter carries a graph only at its call sites
VALID += [
    # one caller passes a model output, another a plain tensor: the parameter is unknown
    valid(
        """
import torch
import torch.nn as nn


def squash(img, lo=-1.0, hi=1.0):
    img.data.clamp_(lo, hi)
    return img


def train_step(gen, z, opt):
    fake = gen(z)
    fake = squash(fake)
    loss = fake.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


def show(noise):
    return squash(torch.randn(4, 3) + noise)
"""
    ),
    # the helper only ever runs under no_grad: no graph reaches it
    valid(
        """
import torch


def rescale(frames, factor):
    frames.data *= factor
    return frames


def evaluate(decoder, codes):
    with torch.no_grad():
        frames = decoder(codes)
        frames = rescale(frames, 0.5)
    return frames
"""
    ),
    # the helper is handed to other code as a callback: callers this file cannot see
    valid(
        """
import torch


def clip_output(out):
    out.data.clamp_(0, 1)
    return out


def fit(model, batches, opt, hooks):
    hooks.append(clip_output)
    for x, y in batches:
        pred = clip_output(model(x))
        loss = (pred - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
    ),
]

INVALID += [
    # every same-file call passes a generator's output: `.data` changes in the helper
    # hide the shift and scale from autograd, and its result carries the graph back
    invalid(
        """
import torch
import torch.nn as nn


def shift_and_scale(perturbation, bound=0.1):
    perturbation.data += 1
    perturbation.data *= 0.5 * bound
    return perturbation


def attack_step(generator, images, classifier, labels, opt):
    perturbation = generator(images)
    perturbation = shift_and_scale(perturbation, 0.05)
    adv = images + perturbation
    adv.data.clamp_(0, 1)
    loss = -nn.functional.cross_entropy(classifier(adv), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    peak = perturbation.data.abs().max()
    return peak
""",
        """
import torch
import torch.nn as nn


def shift_and_scale(perturbation, bound=0.1):
    perturbation.data += 1
    perturbation.data *= 0.5 * bound
    return perturbation


def attack_step(generator, images, classifier, labels, opt):
    perturbation = generator(images)
    perturbation = shift_and_scale(perturbation, 0.05)
    adv = images + perturbation
    adv.data.clamp_(0, 1)
    loss = -nn.functional.cross_entropy(classifier(adv), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    peak = perturbation.detach().abs().max()
    return peak
"""
    ),
    # F7. pre-0.4 `loss.data[0]` on a 0-dim loss raises IndexError today: `.item()` is meant
    invalid(
        """
import torch
import torch.nn.functional as F


def train(model, loader, optimizer):
    for data, target in loader:
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        print("loss: {:.4f}".format(loss.data[0]))
""",
        """
import torch
import torch.nn.functional as F


def train(model, loader, optimizer):
    for data, target in loader:
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        print("loss: {:.4f}".format(loss.item()))
""",
    ),
    # F7. ... a functional loss read in place (reduced: 0-dim)
    invalid(
        """
import torch
import torch.nn.functional as F


def test(model, test_loader):
    model.eval()
    test_loss = 0
    for data, target in test_loader:
        output = model(data)
        test_loss += F.nll_loss(output, target, size_average=False).data[0]
    return test_loss
""",
        """
import torch
import torch.nn.functional as F


def test(model, test_loader):
    model.eval()
    test_loss = 0
    for data, target in test_loader:
        output = model(data)
        test_loss += F.nll_loss(output, target, size_average=False).item()
    return test_loss
""",
    ),
    # F7. a loss summed over heads from `0`: backpropagated, so tracked, and one element
    invalid(
        """
import torch
import torch.nn as nn

criterion = nn.CrossEntropyLoss()


def train(model, loader, optimizer):
    total = 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = 0
        for head in model.heads:
            loss += criterion(head(x), y)
        loss.backward()
        optimizer.step()
        total += loss.data[0]
    return total
""",
        """
import torch
import torch.nn as nn

criterion = nn.CrossEntropyLoss()


def train(model, loader, optimizer):
    total = 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = 0
        for head in model.heads:
            loss += criterion(head(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total
""",
    ),
    # F7 near-miss for the fix: an unreduced loss keeps its dimension, `.data[0]` its first element
    invalid(
        """
import torch
import torch.nn.functional as F


def train(model, loader, optimizer):
    for x, y in loader:
        losses = F.cross_entropy(model(x), y, reduction="none")
        losses.mean().backward()
        optimizer.step()
        print(F.cross_entropy(model(x), y, reduction="none").data[0], losses.data[0])
""",
        """
import torch
import torch.nn.functional as F


def train(model, loader, optimizer):
    for x, y in loader:
        losses = F.cross_entropy(model(x), y, reduction="none")
        losses.mean().backward()
        optimizer.step()
        print(F.cross_entropy(model(x), y, reduction="none").detach()[0], losses.detach()[0])
""",
    ),
]
