"""VALID / INVALID examples of `agf012_deprecated_autograd_api` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. the current AMP API
    valid(
        """
import torch

scaler = torch.amp.GradScaler("cuda")

def train_step(model, batch, optimizer):
    with torch.amp.autocast("cuda", dtype=torch.bfloat16):
        loss = model(batch).mean()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""
    ),
    # 2. `torch.autocast` is not deprecated
    valid(
        """
import torch

def forward_bf16(model, x):
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        return model(x)
"""
    ),
    # 3. a project's own `Variable` class (not torch's)
    valid(
        """
from sympy import Variable

def symbols(names):
    return [Variable(n) for n in names]
"""
    ),
    # 4. isinstance check against Variable: not a call, leave it
    valid(
        """
import torch
from torch.autograd import Variable

def is_tensor_like(x):
    return isinstance(x, (torch.Tensor, Variable))
"""
    ),
    # 5. a local `amp` helper module named like torch's
    valid(
        """
from mypkg import amp

def run(model, x):
    with amp.autocast():
        return model(x)
"""
    ),
    # 6. apex amp (a different library)
    valid(
        """
from apex import amp

model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
with amp.scale_loss(loss, optimizer) as scaled_loss:
    scaled_loss.backward()
"""
    ),
    # 7. new-style custom_fwd on a custom Function
    valid(
        """
import torch

class ScaledMM(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad @ b.t(), a.t() @ grad
"""
    ),
    # 8. the name `autocast` from the current API, imported by name
    valid(
        """
from torch.amp import GradScaler, autocast

scaler = GradScaler("cuda")
with autocast("cuda"):
    pass
"""
    ),
    # 9. Variable mentioned in a string and a comment only
    valid(
        """
import torch

# torch.autograd.Variable is gone; plain tensors track gradients
HELP = "Variable(x) is deprecated"
"""
    ),
    # version fallbacks kept on purpose (Lightning, accelerate, timm)
    valid(
        """
import torch

def make_scaler(device, new_torch):
    scaler = torch.amp.GradScaler(device=device) if new_torch else torch.cuda.amp.GradScaler()
    try:
        other = torch.amp.GradScaler(device=device)
    except (AttributeError, TypeError):
        other = torch.cuda.amp.GradScaler()
    if is_torch_version(">=", "2.3"):
        return torch.amp.GradScaler("cuda")
    else:
        return torch.cuda.amp.GradScaler()
"""
    ),
    # the alias picks the current API, or keeps the old one only as the fallback for old torch
    valid(
        """
import contextlib

import torch


def predict(model, loader, use_amp=True):
    amp_ctx = torch.autocast if use_amp else contextlib.nullcontext
    legacy = torch.amp.autocast if hasattr(torch, "amp") else torch.cuda.amp.autocast
    scores = []
    with torch.no_grad():
        for images, _ in loader:
            with amp_ctx("cuda"), legacy("cuda"):
                scores.append(model(images).softmax(-1))
    return torch.cat(scores)
"""
    ),
]

INVALID = [
    # 1. classic AMP training loop, attribute spelling
    invalid(
        """
import torch

scaler = torch.cuda.amp.GradScaler()

def train_step(model, images, labels, optimizer, criterion):
    optimizer.zero_grad()
    with torch.cuda.amp.autocast():
        loss = criterion(model(images), labels)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
        """
import torch

scaler = torch.amp.GradScaler("cuda")

def train_step(model, images, labels, optimizer, criterion):
    optimizer.zero_grad()
    with torch.amp.autocast("cuda"):
        loss = criterion(model(images), labels)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
""",
    ),
    # 2. `from torch.cuda.amp import autocast, GradScaler`, keyword and positional args
    invalid(
        """
import torch
from torch.cuda.amp import GradScaler, autocast

scaler = GradScaler(2.0**14, enabled=use_amp)
with autocast(use_amp, torch.bfloat16):
    out = model(x)
""",
        """
import torch

scaler = torch.amp.GradScaler("cuda", 2.0**14, enabled=use_amp)
with torch.amp.autocast("cuda", enabled=use_amp, dtype=torch.bfloat16):
    out = model(x)
""",
    ),
    # 3. no `import torch` yet: it is added
    invalid(
        """
from torch.cuda.amp import autocast


def forward_half(model, x):
    with autocast(enabled=True):
        return model(x)
""",
        """
import torch


def forward_half(model, x):
    with torch.amp.autocast("cuda", enabled=True):
        return model(x)
""",
    ),
    # 4. CPU autocast through an alias
    invalid(
        """
import torch as T

def predict(model, x):
    with T.cpu.amp.autocast(dtype=T.bfloat16):
        return model(x)
""",
        """
import torch as T

def predict(model, x):
    with T.amp.autocast("cpu", dtype=T.bfloat16):
        return model(x)
""",
    ),
    # 5. custom Function with the old custom_fwd / custom_bwd decorators
    invalid(
        """
import torch
from torch.cuda.amp import custom_bwd, custom_fwd

class MyMM(torch.autograd.Function):
    @staticmethod
    @custom_fwd(cast_inputs=torch.float32)
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a.mm(b)

    @staticmethod
    @custom_bwd
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad.mm(b.t()), a.t().mm(grad)
""",
        """
import torch

class MyMM(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a.mm(b)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad.mm(b.t()), a.t().mm(grad)
""",
    ),
    # 6. Variable around loader batches (0.3-era training loop): just the tensor
    invalid(
        """
import torch
from torch.autograd import Variable

def train(model, train_loader, optimizer, criterion):
    for i, (images, labels) in enumerate(train_loader):
        images = Variable(images.cuda())
        labels = Variable(labels.cuda())
        optimizer.zero_grad()
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
""",
        """
import torch

def train(model, train_loader, optimizer, criterion):
    for i, (images, labels) in enumerate(train_loader):
        images = images.cuda()
        labels = labels.cuda()
        optimizer.zero_grad()
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
""",
    ),
    # 7. Variable of a value that may require grad: it detaches, say so
    invalid(
        """
import torch

def features(encoder, x):
    h = torch.autograd.Variable(encoder(x) + 1)
    return h
""",
        """
def features(encoder, x):
    h = (encoder(x) + 1).detach()
    return h
""",
    ),
    # 8. Variable(..., requires_grad=True): a fresh tensor and a named one
    invalid(
        """
import torch
from torch.autograd import Variable

w = Variable(torch.randn(10, 1) * 0.01, requires_grad=True)
b = Variable(torch.zeros(1), requires_grad=True)
z = Variable(noise, requires_grad=True)
""",
        """
import torch

w = (torch.randn(10, 1) * 0.01).detach().requires_grad_()
b = torch.zeros(1).requires_grad_()
z = noise.detach().requires_grad_()
""",
    ),
    # 9. volatile=True: report only (the intent was no_grad)
    invalid(
        """
import torch
from torch.autograd import Variable

def evaluate(model, x):
    x = Variable(x, volatile=True)
    return model(x)
"""
    ),
    # 10. autocast(*args): cannot map positions, report only
    invalid(
        """
import torch

def run(model, x, amp_args):
    with torch.cuda.amp.autocast(*amp_args):
        return model(x)
"""
    ),
    # 11. `from torch.cuda import amp`; `.data` read wrapped in Variable
    invalid(
        """
import torch
from torch.cuda import amp
from torch.autograd import Variable

scaler = amp.GradScaler(enabled=True)
target = Variable(teacher_out.data)
""",
        """
import torch

scaler = torch.amp.GradScaler("cuda", enabled=True)
target = teacher_out.data
""",
    ),
    # 12. volatile=False is a no-op: a fresh tensor needs no Variable at all
    invalid(
        """
import torch
from torch.autograd import Variable

noise = Variable(torch.randn(16, 100).cuda(), volatile=False)
""",
        """
import torch

noise = torch.randn(16, 100).cuda()
""",
    ),
    # 13. `x = Variable(x)` on a loader batch is a no-op line: it goes (its comment stays)
    invalid(
        """
import torch
from torch.autograd import Variable

def train(model, train_loader, optimizer):
    for inputs, labels in train_loader:
        # wrap for autograd
        inputs = Variable(inputs)
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
""",
        """
import torch

def train(model, train_loader, optimizer):
    for inputs, labels in train_loader:
        # wrap for autograd
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
""",
    ),
    # the deprecated callable referenced through a conditional alias (LAION-AI/CLIP_benchmark#136's shape)
    invalid(
        """
import contextlib

import torch


def embed_captions(text_encoder, batches, mixed_precision=True):
    amp_ctx = torch.cuda.amp.autocast if mixed_precision else contextlib.nullcontext
    features = []
    with torch.no_grad():
        for tokens in batches:
            with amp_ctx():
                features.append(text_encoder(tokens))
    return torch.cat(features)
""",
        """
import functools
import contextlib

import torch


def embed_captions(text_encoder, batches, mixed_precision=True):
    amp_ctx = functools.partial(torch.amp.autocast, "cuda") if mixed_precision else contextlib.nullcontext
    features = []
    with torch.no_grad():
        for tokens in batches:
            with amp_ctx():
                features.append(text_encoder(tokens))
    return torch.cat(features)
""",
    ),
    # an aliased GradScaler: the new signature is the old one after the device, positionals map
    # (module level: other files may call the alias too, so the fix is unsafe)
    invalid(
        """
import torch

make_scaler = torch.cuda.amp.GradScaler
scaler = make_scaler(2.0 ** 10)
""",
        """
import functools
import torch

make_scaler = functools.partial(torch.amp.GradScaler, "cuda")
scaler = make_scaler(2.0 ** 10)
""",
    ),
    # the alias is called with a positional `enabled`, which the new autocast reads as dtype: report only
    invalid(
        """
import torch

def evaluate(model, batch, half):
    autocast = torch.cuda.amp.autocast
    with autocast(half):
        return model(batch)
"""
    ),
    # a class attribute is called through `self`, where its calls are not seen: report only
    invalid(
        """
import torch


class Evaluator:
    autocast = torch.cuda.amp.autocast

    def run(self, model, batch):
        with self.autocast(True):
            return model(batch)
"""
    ),
    # F6. `from torch.cuda import amp`: the submodule imported by name is the same API
    invalid(
        """
import torch
from torch.cuda import amp

scaler = amp.GradScaler()


def loss_of(model, images, labels, criterion):
    with amp.autocast():
        return criterion(model(images), labels)
""",
        """
import torch

scaler = torch.amp.GradScaler("cuda")


def loss_of(model, images, labels, criterion):
    with torch.amp.autocast("cuda"):
        return criterion(model(images), labels)
""",
    ),
    # F6. ... also beside other names, under another name
    invalid(
        """
import torch
from torch.cuda import nccl, amp as cuda_amp

scaler = cuda_amp.GradScaler(init_scale=1024)
""",
        """
import torch
from torch.cuda import nccl

scaler = torch.amp.GradScaler("cuda", init_scale=1024)
""",
    ),
]
