"""VALID / INVALID examples of `agf019_accumulation_without_loss_scaling` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. the loss divided by the accumulation count before backward
    valid(
        """
import torch
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    loss = loss / accum_steps
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
"""
    ),
    # 2. in place, `/=`
    valid(
        """
import torch
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    loss /= accum_steps
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
"""
    ),
    # 3. multiplied by the reciprocal, inside the backward call
    valid(
        """
import torch
optimizer = torch.optim.AdamW(model.parameters())
for step, batch in enumerate(loader):
    (model(**batch).loss * (1.0 / args.accum)).backward()
    if (step + 1) % args.accum == 0:
        optimizer.step()
        optimizer.zero_grad()
"""
    ),
    # 4. a factor computed once under another name
    valid(
        """
import torch
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scale = 1.0 / accum_steps
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) * scale
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
"""
    ),
    # 5. per-token normalisation over the window: a sum-reduced loss divided by the
    #    window's token count (transformers' Trainer since its 2024 fix)
    valid(
        """
import torch
import torch.nn.functional as F
optimizer = torch.optim.AdamW(model.parameters())
for step, batch in enumerate(loader):
    logits = model(batch["input_ids"])
    loss = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), reduction="sum") / num_items_in_batch
    loss.backward()
    if (step + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
"""
    ),
    # 6. a sum-reduced criterion: summing over micro-batches is the big batch's sum
    valid(
        """
import torch
from torch import nn
criterion = nn.MSELoss(reduction="sum")
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
"""
    ),
    # 7. no accumulation: a step on every iteration
    valid(
        """
import torch
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for i, (x, y) in enumerate(loader):
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    if (i + 1) % log_every == 0:
        print(loss.item())
"""
    ),
    # 8. the gradients divided before the step (NVIDIA's Mask R-CNN)
    valid(
        """
import torch
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    loss.backward()
    if (i + 1) % accum_steps == 0:
        for p in model.parameters():
            p.grad.data /= accum_steps
        optimizer.step()
        optimizer.zero_grad()
"""
    ),
    # 9. Accelerate runs the backward and divides by its own accumulation count
    valid(
        """
import torch
optimizer = torch.optim.AdamW(model.parameters())
for step, batch in enumerate(loader):
    loss = model(**batch).loss
    accelerator.backward(loss)
    if (step + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
"""
    ),
    # 10. nanoGPT's micro-batch loop, scaled
    valid(
        """
import torch
optimizer = torch.optim.AdamW(model.parameters())
while True:
    for micro_step in range(gradient_accumulation_steps):
        logits, loss = model(X, Y)
        loss = loss / gradient_accumulation_steps
        X, Y = get_batch("train")
        scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
"""
    ),
    # 11. `.div(k)` on the loss
    valid(
        """
import torch
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for i, (x, y) in enumerate(loader):
    criterion(model(x), y).div(accum_steps).backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
"""
    ),
    # 12. the count passed to a loss function that divides inside
    valid(
        """
import torch
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for i, (x, y) in enumerate(loader):
    loss = compute_loss(model(x), y, accum_steps)
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
"""
    ),
    # 13. a scheduler stepped every k micro-batches, the optimizer on every one
    valid(
        """
import torch
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)
for i, (x, y) in enumerate(loader):
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
    if (i + 1) % 100 == 0:
        scheduler.step()
"""
    ),
]

INVALID = [
    # 1. the usual loop: divide the named loss before backward
    invalid(
        """
import torch
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
import torch
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    loss = loss / accum_steps
    loss.backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
    ),
    # 2. backward on an expression: divide the expression
    invalid(
        """
import torch
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for i, (x, y) in enumerate(loader):
    criterion(model(x), y).backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
import torch
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for i, (x, y) in enumerate(loader):
    (criterion(model(x), y) / accum_steps).backward()
    if (i + 1) % accum_steps == 0:
        optimizer.step()
        optimizer.zero_grad()
""",
    ),
    # 3. AMP: GradScaler's scale is not scaling by k; the loss inside it is divided
    invalid(
        """
import torch
optimizer = torch.optim.AdamW(model.parameters())
scaler = torch.amp.GradScaler("cuda")
for i, (x, y) in enumerate(loader):
    with torch.autocast("cuda"):
        out = model(x)
    scaler.scale(criterion(out, y)).backward()
    if (i + 1) % iters_to_accumulate == 0:
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
""",
        """
import torch
optimizer = torch.optim.AdamW(model.parameters())
scaler = torch.amp.GradScaler("cuda")
for i, (x, y) in enumerate(loader):
    with torch.autocast("cuda"):
        out = model(x)
    scaler.scale(criterion(out, y) / iters_to_accumulate).backward()
    if (i + 1) % iters_to_accumulate == 0:
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
""",
    ),
    # 4. nanoGPT before its fix: a micro-batch loop inside the step loop
    invalid(
        """
import torch
optimizer = torch.optim.AdamW(model.parameters())
while True:
    for micro_step in range(gradient_accumulation_steps):
        logits, loss = model(X, Y)
        X, Y = get_batch("train")
        loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
""",
        """
import torch
optimizer = torch.optim.AdamW(model.parameters())
while True:
    for micro_step in range(gradient_accumulation_steps):
        logits, loss = model(X, Y)
        X, Y = get_batch("train")
        loss = loss / gradient_accumulation_steps
        loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
""",
    ),
    # 5. a flag bound to the test
    invalid(
        """
import torch
optimizer = torch.optim.Adam(sae.parameters(), lr=1e-3)
for batch_idx, tokens in enumerate(train_loader):
    is_grad_step = (batch_idx + 1) % n_gradient_accumulation_steps == 0
    loss, loss_dict = calc_loss(sae(tokens), tokens)
    loss.backward()
    if is_grad_step:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
import torch
optimizer = torch.optim.Adam(sae.parameters(), lr=1e-3)
for batch_idx, tokens in enumerate(train_loader):
    is_grad_step = (batch_idx + 1) % n_gradient_accumulation_steps == 0
    loss, loss_dict = calc_loss(sae(tokens), tokens)
    loss = loss / n_gradient_accumulation_steps
    loss.backward()
    if is_grad_step:
        optimizer.step()
        optimizer.zero_grad()
""",
    ),
    # 6. a counter
    invalid(
        """
import torch
optimizer = torch.optim.SGD(policy.parameters(), lr=0.01)
count = 0
for obs, act, ret in batches:
    loss = -(policy(obs).log_prob(act) * ret).mean()
    loss.backward()
    count += 1
    if count == accum:
        optimizer.step()
        optimizer.zero_grad()
        count = 0
""",
        """
import torch
optimizer = torch.optim.SGD(policy.parameters(), lr=0.01)
count = 0
for obs, act, ret in batches:
    loss = -(policy(obs).log_prob(act) * ret).mean()
    loss = loss / accum
    loss.backward()
    count += 1
    if count == accum:
        optimizer.step()
        optimizer.zero_grad()
        count = 0
""",
    ),
    # 7. the count read from the arguments, with a flush at the end of the epoch
    invalid(
        """
import torch
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
for step, batch in enumerate(train_dataloader):
    outputs = model(**batch)
    loss = outputs.loss
    loss.backward()
    if (step + 1) % args.gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1:
        optimizer.step()
        lr_scheduler.step()
        optimizer.zero_grad()
""",
        """
import torch
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
for step, batch in enumerate(train_dataloader):
    outputs = model(**batch)
    loss = outputs.loss
    loss = loss / args.gradient_accumulation_steps
    loss.backward()
    if (step + 1) % args.gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1:
        optimizer.step()
        lr_scheduler.step()
        optimizer.zero_grad()
""",
    ),
    # 8. a literal count
    invalid(
        """
import torch
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for i, (x, y) in enumerate(loader):
    loss = loss_fn(net(x), y)
    loss.backward()
    if i % 4 == 3:
        optimizer.step()
        optimizer.zero_grad()
""",
        """
import torch
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for i, (x, y) in enumerate(loader):
    loss = loss_fn(net(x), y)
    loss = loss / 4
    loss.backward()
    if i % 4 == 3:
        optimizer.step()
        optimizer.zero_grad()
""",
    ),
    # 9. a trainer method; terms weighted by numbers are not scaling by k
    invalid(
        """
import torch
class Trainer:
    def __init__(self, model, accum):
        self.model = model
        self.accum = accum
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_epoch(self, loader):
        for i, (images, targets) in enumerate(loader):
            losses = self.model(images, targets)
            loss = losses["cls"] + 0.5 * losses["box"]
            loss.backward()
            if i % self.accum == self.accum - 1:
                self.optimizer.step()
                self.optimizer.zero_grad()
""",
        """
import torch
class Trainer:
    def __init__(self, model, accum):
        self.model = model
        self.accum = accum
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_epoch(self, loader):
        for i, (images, targets) in enumerate(loader):
            losses = self.model(images, targets)
            loss = losses["cls"] + 0.5 * losses["box"]
            loss = loss / self.accum
            loss.backward()
            if i % self.accum == self.accum - 1:
                self.optimizer.step()
                self.optimizer.zero_grad()
""",
    ),
    # 10. `import torch as T`, `torch.autograd.backward` on a sum of terms
    invalid(
        """
import torch as T
opt = T.optim.Adam(model.parameters())
for i, (x, y) in enumerate(loader):
    out = model(x)
    T.autograd.backward(ce(out, y) + aux(out))
    if not (i + 1) % k:
        opt.step()
        opt.zero_grad()
""",
        """
import torch as T
opt = T.optim.Adam(model.parameters())
for i, (x, y) in enumerate(loader):
    out = model(x)
    T.autograd.backward((ce(out, y) + aux(out)) / k)
    if not (i + 1) % k:
        opt.step()
        opt.zero_grad()
""",
    ),
    # 11. the logged loss multiplied back by k, as if the loss had been divided
    invalid(
        """
import torch
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for epoch in range(epochs):
    total_loss = 0.0
    for step, (images, labels) in enumerate(loader):
        loss = criterion(model(images), labels)
        loss.backward()
        if (step + 1) % accumulate_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
        total_loss += loss.item() * accumulate_steps
""",
        """
import torch
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for epoch in range(epochs):
    total_loss = 0.0
    for step, (images, labels) in enumerate(loader):
        loss = criterion(model(images), labels)
        loss = loss / accumulate_steps
        loss.backward()
        if (step + 1) % accumulate_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
        total_loss += loss.item() * accumulate_steps
""",
    ),
]
