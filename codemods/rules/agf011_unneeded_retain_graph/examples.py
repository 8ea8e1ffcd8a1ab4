"""VALID / INVALID examples of `agf011_unneeded_retain_graph` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. no retain_graph at all
    valid(
        """
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
"""
    ),
    # 2. TBPTT: the hidden state carries the graph into the next iteration
    valid(
        """
hidden = model.init_hidden(batch_size)
for x, y in train_loader:
    optimizer.zero_grad()
    out, hidden = model(x, hidden)
    loss = criterion(out, y)
    loss.backward(retain_graph=True)
    optimizer.step()
"""
    ),
    # 3. the graph is used again: second backward through a shared feature
    valid(
        """
for x, y in loader:
    feats = backbone(x)
    loss_a = head_a(feats).mean()
    loss_a.backward(retain_graph=True)
    log_grads(model)
    loss_b = head_b(feats).mean()
    loss_b.backward()
"""
    ),
    # 4. one shared feature, several heads in a loop: the graph of z is needed each time
    valid(
        """
z = encoder(x)
for head in heads:
    loss = head(z).pow(2).mean()
    loss.backward(retain_graph=True)
"""
    ),
    # 5. WGAN-GP: autograd.grad then backward over the same graph
    valid(
        """
import torch

def critic_step(critic, real, fake, opt):
    interp = (real + fake).requires_grad_(True)
    score = critic(interp)
    grads = torch.autograd.grad(score.sum(), interp, create_graph=True, retain_graph=True)[0]
    loss = score.mean() + 10 * (grads.norm(2, dim=1) - 1).pow(2).mean()
    loss.backward()
    opt.step()
"""
    ),
    # 6. the loss is returned: the caller may backpropagate again
    valid(
        """
def train_step(model, batch, optimizer):
    loss = model(batch).mean()
    loss.backward(retain_graph=True)
    optimizer.step()
    return loss
"""
    ),
    # 7. a parameter that may carry the caller's graph (not a data batch)
    valid(
        """
def head_step(head, features, target):
    loss = (head(features) - target).pow(2).mean()
    loss.backward(retain_graph=True)
"""
    ),
    # 8. a stateful module in the same file: forward stores a tensor on self
    valid(
        """
import torch

class Memory(torch.nn.Module):
    def forward(self, x):
        self.last = self.proj(x) + self.last
        return self.last

for x, y in loader:
    loss = (model(x) - y).pow(2).mean()
    loss.backward(retain_graph=True)
    optimizer.step()
"""
    ),
    # 9. something reads .grad between the two backward passes
    valid(
        """
for x, y in loader:
    out = model(x)
    l1 = criterion(out, y)
    l2 = out.pow(2).mean()
    l1.backward(retain_graph=True)
    g1 = [p.grad.clone() for p in model.parameters()]
    l2.backward()
"""
    ),
    # 10. iterating over tensors that share a graph (not data batches)
    valid(
        """
parts = model(x).chunk(4)
for part in parts:
    part.sum().backward(retain_graph=True)
"""
    ),
    # 11. an attribute that a method reassigns (a carried memory) is read into the loss
    valid(
        """
class Trainer:
    def __init__(self, model, optimizer, weight):
        self.model = model
        self.optimizer = optimizer
        self.weight = weight
        self.prior = 0

    def fit(self, train_loader):
        for inputs, targets in train_loader:
            out = self.model(inputs)
            loss_c = (out - targets).pow(2).mean() + self.prior
            self.optimizer.zero_grad()
            loss_c.backward(retain_graph=True)
            self.optimizer.step()
            self.prior = self.weight * out.mean()
"""
    ),
    # 12. a same-file method that caches its result on self builds part of the loss
    valid(
        """
class Trainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer
        self.cached_reg = None

    def regularizer(self):
        if self.cached_reg is None:
            self.cached_reg = sum(p.pow(2).sum() for p in self.model.parameters())
        return self.cached_reg

    def fit(self, train_loader):
        for inputs, targets in train_loader:
            loss = (self.model(inputs) - targets).abs().mean() + self.regularizer()
            self.optimizer.zero_grad()
            loss.backward(retain_graph=True)
            self.optimizer.step()
"""
    ),
    # 13. a script whose loss weight is itself a graph built once, before the loop
    valid(
        """
import torch

anchor = model(reference).mean()
for step, (inputs, target) in enumerate(train_loader):
    loss = criterion(model(inputs), target) * anchor
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    optimizer.step()
"""
    ),
    # 14. a second update reuses the generator output made before the first backward
    valid(
        """
import torch

for epoch in range(epochs):
    for step, real in enumerate(range(steps)):
        noise = torch.randn(4, 8)
        fake = G(noise)
        loss = critic_loss(D(fake), D(real_batch)) + recon_loss(fake)
        loss.backward(retain_graph=True)
        opt_G.step()
        opt_D.zero_grad()
        loss_D = critic_loss(D(fake), D(real_batch))
        loss_D.backward()
        opt_D.step()
"""
    ),
    # 15. the draft carried into the next pass is a soft distribution: it keeps the last graph
    valid(
        """
import torch

def refine(model, inputs, targets, optimizer, passes):
    draft = None
    for k in range(passes):
        logits = model(inputs, draft)
        loss = criterion(logits.flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()
        draft = logits.softmax(dim=-1)
"""
    ),
    # 16. the carried value is topk's values (not its indices), through a same-file helper
    valid(
        """
import torch

def best(scores):
    return torch.topk(scores, 1, dim=-1)[0].squeeze(-1)

def refine(model, inputs, targets, optimizer):
    previous = None
    for k in range(3):
        scores = model(inputs, previous)
        loss = criterion(scores, targets)
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()
        previous = best(scores)
"""
    ),
    # 17. a parameter the only caller fills with a graph (a learned temperature)
    valid(
        """
import torch

def run_rounds(model, inputs, targets, temperature, optimizer):
    for r in range(3):
        loss = criterion(model(inputs) / temperature, targets)
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()

def fit(model, temp_net, loader, optimizer):
    for inputs, targets in loader:
        run_rounds(model, inputs, targets, temp_net(inputs).mean(), optimizer)
"""
    ),
    # 18. a module-level weight built by a forward pass, read as a global in the loop
    valid(
        """
import torch

weight = prior_net(torch.ones(1, 4)).sum()

def run_rounds(model, inputs, targets, optimizer):
    for r in range(3):
        loss = criterion(model(inputs), targets) * weight
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()
"""
    ),
    # 19. the carried draft is a fresh zeros tensor, but each pass adds the logits into it in place
    valid(
        """
import torch

def refine(model, inputs, targets, optimizer):
    draft = torch.zeros(4, 8)
    for k in range(3):
        logits = model(inputs, draft)
        loss = criterion(logits, targets)
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()
        draft.mul_(0.5).add_(logits)
"""
    ),
    # 20. several retaining backwards, then one without: the last retaining one is needed
    valid(
        """
def check_repeatable(model, inputs, targets):
    loss = criterion(model(inputs), targets)
    loss.backward(retain_graph=True)
    loss.backward(retain_graph=True)
    loss.backward()
"""
    ),
    # 21. the retaining backwards run in a loop over a graph built once before it
    valid(
        """
def accumulate(model, inputs, targets, optimizer):
    loss = criterion(model(inputs), targets)
    for step in range(4):
        loss.backward(retain_graph=True)
        loss.backward(retain_graph=True)
    optimizer.step()
"""
    ),
    # 22. a second loss on the same features is backpropagated after the repeated one
    valid(
        """
def train_step(backbone, head_a, head_b, inputs, optimizer):
    feats = backbone(inputs)
    loss_a = head_a(feats).mean()
    loss_a.backward(retain_graph=True)
    loss_a.backward(retain_graph=True)
    loss_b = head_b(feats).mean()
    loss_b.backward()
    optimizer.step()
"""
    ),
    # 23. Lightning: the loss is kept on the module after the repeated backward
    valid(
        """
from lightning.pytorch import LightningModule

class Model(LightningModule):
    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        x, y = batch
        loss = self.loss(self(x), y)
        self.manual_backward(loss, retain_graph=True)
        self.manual_backward(loss, retain_graph=True)
        opt.step()
        self.last_loss = loss
"""
    ),
    # 24. the loss is returned: the caller may backpropagate through the graph again
    valid(
        """
def double_backward(model, inputs, targets):
    loss = criterion(model(inputs), targets)
    loss.backward(retain_graph=True)
    loss.backward(retain_graph=True)
    return loss
"""
    ),
    # 25. the loss comes in as an argument: whoever built it may backpropagate it again
    valid(
        """
def backward_twice(loss, optimizer):
    loss.backward(retain_graph=True)
    loss.backward(retain_graph=True)
    optimizer.step()
"""
    ),
    # 26. a later backward in another block (under a condition) may reach the graph
    valid(
        """
def train_step(model, inputs, targets, optimizer, check):
    loss = criterion(model(inputs), targets)
    loss.backward(retain_graph=True)
    loss.backward(retain_graph=True)
    if check:
        loss.backward()
    optimizer.step()
"""
    ),
]

INVALID = [
    # 1. a plain training loop
    invalid(
        """
for x, y in train_loader:
    optimizer.zero_grad()
    out = model(x)
    loss = criterion(out, y)
    loss.backward(retain_graph=True)
    optimizer.step()
""",
        """
for x, y in train_loader:
    optimizer.zero_grad()
    out = model(x)
    loss = criterion(out, y)
    loss.backward()
    optimizer.step()
""",
    ),
    # 2. two losses sharing one graph, backpropagated back to back
    invalid(
        """
for images, labels in loader:
    optimizer.zero_grad()
    logits, aux = model(images)
    main_loss = criterion(logits, labels)
    aux_loss = 0.4 * criterion(aux, labels)
    main_loss.backward(retain_graph=True)
    aux_loss.backward()
    optimizer.step()
""",
        """
for images, labels in loader:
    optimizer.zero_grad()
    logits, aux = model(images)
    main_loss = criterion(logits, labels)
    aux_loss = 0.4 * criterion(aux, labels)
    (main_loss + aux_loss).backward()
    optimizer.step()
""",
    ),
    # 3. a trainer method with enumerate(tqdm(...)) and a device
    invalid(
        """
import torch
from tqdm import tqdm

class Trainer:
    def train_epoch(self, epoch):
        self.model.train()
        for step, (x, y) in enumerate(tqdm(self.train_loader)):
            x, y = x.to(self.device), y.to(self.device)
            self.optimizer.zero_grad()
            loss = self.criterion(self.model(x), y)
            loss.backward(retain_graph=True)  # "fixes" an error once seen
            self.optimizer.step()
            self.writer.add_scalar("loss", loss.item(), step)
""",
        """
import torch
from tqdm import tqdm

class Trainer:
    def train_epoch(self, epoch):
        self.model.train()
        for step, (x, y) in enumerate(tqdm(self.train_loader)):
            x, y = x.to(self.device), y.to(self.device)
            self.optimizer.zero_grad()
            loss = self.criterion(self.model(x), y)
            loss.backward()  # "fixes" an error once seen
            self.optimizer.step()
            self.writer.add_scalar("loss", loss.item(), step)
""",
    ),
    # 4. a train_step function on one batch
    invalid(
        """
def train_step(model, batch, optimizer, criterion):
    inputs, targets = batch
    optimizer.zero_grad()
    loss = criterion(model(inputs), targets)
    loss.backward(retain_graph=True)
    optimizer.step()
    return loss.item()
""",
        """
def train_step(model, batch, optimizer, criterion):
    inputs, targets = batch
    optimizer.zero_grad()
    loss = criterion(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss.item()
""",
    ),
    # 5. merge in a function, keeping the comment of the second call
    invalid(
        """
def training_step(model, batch, opt):
    x, y = batch
    recon, mu, logvar = model(x)
    rec = (recon - x).pow(2).mean()
    kld = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).mean()
    opt.zero_grad()
    rec.backward(retain_graph=True)
    # regulariser
    kld.backward()
    opt.step()
""",
        """
def training_step(model, batch, opt):
    x, y = batch
    recon, mu, logvar = model(x)
    rec = (recon - x).pow(2).mean()
    kld = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).mean()
    opt.zero_grad()
    # regulariser
    (rec + kld).backward()
    opt.step()
""",
    ),
    # 6. range loop over synthetic batches in a script
    invalid(
        """
import torch

model = torch.nn.Linear(10, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for it in range(100):
    xb = torch.randn(32, 10)
    loss = model(xb).pow(2).mean()
    opt.zero_grad()
    loss.backward(retain_graph=True)
    opt.step()
""",
        """
import torch

model = torch.nn.Linear(10, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for it in range(100):
    xb = torch.randn(32, 10)
    loss = model(xb).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    ),
    # 7. other arguments are kept (gradient given explicitly)
    invalid(
        """
for batch in dataloader:
    out = net(batch)
    out.backward(torch.ones_like(out), retain_graph=True)
    opt.step()
    opt.zero_grad()
""",
        """
for batch in dataloader:
    out = net(batch)
    out.backward(torch.ones_like(out))
    opt.step()
    opt.zero_grad()
""",
    ),
    # 8. AMP-free multi-loss with a scalar weight, inside autocast
    invalid(
        """
import torch

for x, y in loader:
    with torch.autocast("cpu"):
        pred = model(x)
        loss_cls = F.cross_entropy(pred, y)
        loss_reg = pred.pow(2).mean()
    loss_cls.backward(retain_graph=True)
    loss_reg.backward()
    optimizer.step()
    optimizer.zero_grad()
""",
        """
import torch

for x, y in loader:
    with torch.autocast("cpu"):
        pred = model(x)
        loss_cls = F.cross_entropy(pred, y)
        loss_reg = pred.pow(2).mean()
    (loss_cls + loss_reg).backward()
    optimizer.step()
    optimizer.zero_grad()
""",
    ),
    # 9. a trainer method: constants set once in __init__, a fresh regulariser, `loss_c` named like a cell
    invalid(
        """
class Trainer:
    def __init__(self, model, optimizer, alpha=0.8):
        self.model = model
        self.optimizer = optimizer
        self.alpha = alpha
        self.aux_loss = 0

    def l2_penalty(self):
        penalty = torch.zeros(1)
        for p in self.model.parameters():
            penalty += p.pow(2).sum()
        return penalty

    def train(self, train_data):
        for i, batch in enumerate(train_data):
            out, prob = self.model(batch["tokens"])
            loss_c = self.criterion_c(out, batch["target"])
            loss_d = self.criterion_d(prob, batch["label"])
            loss = self.alpha * loss_c + (1 - self.alpha) * loss_d + self.l2_penalty() + self.aux_loss
            self.optimizer.zero_grad()
            loss.backward(retain_graph=True)
            self.optimizer.step()
""",
        """
class Trainer:
    def __init__(self, model, optimizer, alpha=0.8):
        self.model = model
        self.optimizer = optimizer
        self.alpha = alpha
        self.aux_loss = 0

    def l2_penalty(self):
        penalty = torch.zeros(1)
        for p in self.model.parameters():
            penalty += p.pow(2).sum()
        return penalty

    def train(self, train_data):
        for i, batch in enumerate(train_data):
            out, prob = self.model(batch["tokens"])
            loss_c = self.criterion_c(out, batch["target"])
            loss_d = self.criterion_d(prob, batch["label"])
            loss = self.alpha * loss_c + (1 - self.alpha) * loss_d + self.l2_penalty() + self.aux_loss
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
""",
    ),
    # 10. a script: the loss weight is a literal bound before the loop
    invalid(
        """
import torch

gama = 0.8
for step, (inputs, target) in enumerate(train_loader):
    loss_c = criterion(model(inputs), target)
    loss = gama * loss_c
    optimizer.zero_grad()
    loss.backward(retain_graph=True)
    optimizer.step()
""",
        """
import torch

gama = 0.8
for step, (inputs, target) in enumerate(train_loader):
    loss_c = criterion(model(inputs), target)
    loss = gama * loss_c
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
    ),
    # 11. a script's second update recomputes (and detaches) everything it backpropagates
    invalid(
        """
import torch

def hinge(r_real, r_fake):
    return (torch.relu(1 + r_fake) + torch.relu(1 - r_real)).mean()

for epoch in range(2):
    for step, k in enumerate(range(3)):
        frames = torch.randn(2, 3, 8, 8)
        cond = frames[:, 0]
        style = E(frames).mean(dim=0)
        fake = G(cond, style)
        r_fake, r_real = D(fake, k), D(frames, k)
        loss = recon(fake, frames) + hinge(r_real, r_fake)
        loss.backward(retain_graph=True)
        opt_G.step()
        opt_D.step()

        # discriminator again, on recomputed outputs
        fake = G(cond, style).detach()
        r_fake, r_real = D(fake, k), D(frames, k)
        opt_D.zero_grad()
        loss_D = hinge(r_real, r_fake)
        loss_D.backward()
        opt_D.step()
""",
        """
import torch

def hinge(r_real, r_fake):
    return (torch.relu(1 + r_fake) + torch.relu(1 - r_real)).mean()

for epoch in range(2):
    for step, k in enumerate(range(3)):
        frames = torch.randn(2, 3, 8, 8)
        cond = frames[:, 0]
        style = E(frames).mean(dim=0)
        fake = G(cond, style)
        r_fake, r_real = D(fake, k), D(frames, k)
        loss = recon(fake, frames) + hinge(r_real, r_fake)
        loss.backward()
        opt_G.step()
        opt_D.step()

        # discriminator again, on recomputed outputs
        fake = G(cond, style).detach()
        r_fake, r_real = D(fake, k), D(frames, k)
        opt_D.zero_grad()
        loss_D = hinge(r_real, r_fake)
        loss_D.backward()
        opt_D.step()
""",
    ),
    # 12. each pass re-reads only the previous pass's argmax (integer indices carry no graph)
    invalid(
        """
import torch

def refine(model, inputs, targets, optimizer, passes):
    draft = None
    for k in range(passes):
        logits = model(inputs, draft)
        loss = criterion(logits.flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()
        draft = logits.argmax(dim=-1)
""",
        """
import torch

def refine(model, inputs, targets, optimizer, passes):
    draft = None
    for k in range(passes):
        logits = model(inputs, draft)
        loss = criterion(logits.flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        draft = logits.argmax(dim=-1)
""",
    ),
    # 13. topk indices through a same-file helper returning `.data`, a module constant, a
    #     ratio that the only caller passes as a literal
    invalid(
        """
import torch

num_classes = 10

def clip_tokens(seq):
    return seq.data.clamp_(0, num_classes - 1)

def train_batch(model, inputs, target, optimizer, rounds, ratio):
    previous = None
    flat_target = target.reshape(-1)
    for r in range(rounds):
        scores = model(inputs, previous, ratio)
        loss = criterion(scores.view(-1, num_classes), flat_target)
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()
        previous = clip_tokens(torch.topk(scores, 1, dim=-1)[1].squeeze(-1))

def train(model, loader, optimizer):
    for inputs, target in loader:
        train_batch(model, inputs, target, optimizer, 2, ratio=0.5)
""",
        """
import torch

num_classes = 10

def clip_tokens(seq):
    return seq.data.clamp_(0, num_classes - 1)

def train_batch(model, inputs, target, optimizer, rounds, ratio):
    previous = None
    flat_target = target.reshape(-1)
    for r in range(rounds):
        scores = model(inputs, previous, ratio)
        loss = criterion(scores.view(-1, num_classes), flat_target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        previous = clip_tokens(torch.topk(scores, 1, dim=-1)[1].squeeze(-1))

def train(model, loader, optimizer):
    for inputs, target in loader:
        train_batch(model, inputs, target, optimizer, 2, ratio=0.5)
""",
    ),
    # 14. one graph backpropagated twice in a function: the last backward keeps it for nothing
    invalid(
        """
def train_step(model, batch, optimizer):
    inputs, targets = batch
    optimizer.zero_grad()
    loss = criterion(model(inputs), targets)
    loss.backward(retain_graph=True)
    loss.backward(retain_graph=True)
    optimizer.step()
    return loss.item()
""",
        """
def train_step(model, batch, optimizer):
    inputs, targets = batch
    optimizer.zero_grad()
    loss = criterion(model(inputs), targets)
    loss.backward(retain_graph=True)
    loss.backward()
    optimizer.step()
    return loss.item()
""",
    ),
    # 15. Lightning manual optimization: only the last `manual_backward` of the graph is fixed
    invalid(
        """
import torch
from lightning.pytorch import LightningModule

class GAN(LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.layer = torch.nn.Linear(32, 2)

    def training_step(self, batch, batch_idx):
        opt_a, opt_b = self.optimizers()
        x = batch[0]
        loss_1 = self.loss(self(x))
        self.manual_backward(loss_1)
        opt_a.step()

        loss_2 = self.loss(self(x))
        self.manual_backward(loss_2, retain_graph=True)
        self.manual_backward(loss_2, retain_graph=True)
        opt_b.step()
        opt_b.zero_grad()
        return {"loss1": loss_1.detach(), "loss2": loss_2.detach()}
""",
        """
import torch
from lightning.pytorch import LightningModule

class GAN(LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.layer = torch.nn.Linear(32, 2)

    def training_step(self, batch, batch_idx):
        opt_a, opt_b = self.optimizers()
        x = batch[0]
        loss_1 = self.loss(self(x))
        self.manual_backward(loss_1)
        opt_a.step()

        loss_2 = self.loss(self(x))
        self.manual_backward(loss_2, retain_graph=True)
        self.manual_backward(loss_2)
        opt_b.step()
        opt_b.zero_grad()
        return {"loss1": loss_1.detach(), "loss2": loss_2.detach()}
""",
    ),
    # 16. three backwards of one graph in a test, gradients read between them
    invalid(
        """
import torch

def test_grad_accumulates():
    model = torch.nn.Linear(4, 1)
    inputs = torch.randn(8, 4)
    loss = model(inputs).pow(2).mean()
    loss.backward(retain_graph=True)
    first = model.weight.grad.clone()
    loss.backward(retain_graph=True)
    loss.backward(retain_graph=True)  # third pass
    torch.testing.assert_close(model.weight.grad, 3 * first)
""",
        """
import torch

def test_grad_accumulates():
    model = torch.nn.Linear(4, 1)
    inputs = torch.randn(8, 4)
    loss = model(inputs).pow(2).mean()
    loss.backward(retain_graph=True)
    first = model.weight.grad.clone()
    loss.backward(retain_graph=True)
    loss.backward()  # third pass
    torch.testing.assert_close(model.weight.grad, 3 * first)
""",
    ),
]
