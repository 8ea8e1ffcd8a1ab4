"""VALID / INVALID examples of `agf006_loss_accumulated_with_graph` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. the fixed FAQ loop
    valid(
        """
total_loss = 0.0
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    total_loss += loss.item()
"""
    ),
    # 2. the accumulated total is backpropagated (gradient accumulation by summing losses)
    valid(
        """
def step(model, chunks, optimizer):
    optimizer.zero_grad()
    total = 0
    for x, y in chunks:
        loss = (model(x) - y).pow(2).mean()
        total = total + loss
    total.backward()
    optimizer.step()
"""
    ),
    # 3. multi-task: losses summed in a loop, then backpropagated through a derived name
    valid(
        """
def training_step(self, batch):
    losses = []
    for head, target in zip(self.heads, batch["targets"]):
        loss = self.criterion(head(batch["x"]), target)
        losses.append(loss)
    total = torch.stack(losses).sum()
    total.backward()
"""
    ),
    # 4. validation under no_grad: nothing is recorded
    valid(
        """
import torch

@torch.no_grad()
def evaluate(model, loader, criterion):
    total = 0.0
    for x, y in loader:
        loss = criterion(model(x), y)
        total += loss
    return total / len(loader)
"""
    ),
    # 5. detach already there
    valid(
        """
epoch_losses = []
for batch in loader:
    loss = model(batch).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    epoch_losses.append(loss.detach())
"""
    ),
    # 6. retain_graph: the graph may be used again, leave it alone
    valid(
        """
running = 0
for x in loader:
    loss = model(x).sum()
    loss.backward(retain_graph=True)
    running += loss
"""
    ),
    # 7. the list is reset every iteration: nothing accumulates across iterations
    valid(
        """
for x, y in loader:
    step_losses = []
    loss = criterion(model(x), y)
    loss.backward()
    step_losses.append(loss)
    log(step_losses)
"""
    ),
    # 8. an attribute accumulator: who reads it is unknown here
    valid(
        """
class Trainer:
    def fit(self):
        for x, y in self.loader:
            loss = self.criterion(self.model(x), y)
            loss.backward()
            self.optimizer.step()
            self.history.append(loss)
"""
    ),
    # 9. backward only sometimes: the accumulated graphs may still be used
    valid(
        """
total = 0
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    total += loss
    if (i + 1) % 4 == 0:
        total.backward()
        total = 0
"""
    ),
    # 10. the accumulated value is computed from an int count, not the loss
    valid(
        """
correct = 0
for x, y in loader:
    logits = model(x)
    loss = criterion(logits, y)
    loss.backward()
    optimizer.step()
    correct += (logits.argmax(1) == y).sum()
"""
    ),
    # 11. DETR-style: the criterion takes and returns dicts; kept dicts are not tensors
    valid(
        """
all_outputs = []
for samples, targets in data_loader:
    outputs = model(samples)
    loss_dict = criterion(outputs, targets)
    losses = sum(loss_dict[k] * weight_dict[k] for k in loss_dict.keys() if k in weight_dict)
    optimizer.zero_grad()
    losses.backward()
    optimizer.step()
    all_outputs.append(outputs)
    metric_logger.update(loss_dict)
"""
    ),
    # issue 8: `out["loss"]` is backpropagated, but `out["acc"]` may be a float: keeping
    # one item of the output dict is not known to keep the graph
    valid(
        """
import torch


def train_epoch(model, loader, optimizer, step_fn):
    model.train()
    accuracies = []
    for batch in loader:
        out = step_fn(model, batch)
        optimizer.zero_grad()
        out["loss"].backward()
        optimizer.step()
        accuracies.append(out["acc"])
    return sum(accuracies) / len(accuracies)
"""
    ),
    # 12. the backpropagated item of a step's output dict is detached before the dict is kept
    valid(
        """
class Runner:
    def fit(self, loader, net, optimizer):
        history = []
        for step, batch in enumerate(loader):
            result = net.shared_step(batch)
            result["loss"].backward()
            optimizer.step()
            result["loss"] = result["loss"].detach()
            history.append(result)
        return history
"""
    ),
    # 13. a same-file loss helper also returns an accuracy, which is no input of the loss
    valid(
        """
import torch.nn.functional as F

def seg_loss(logits, masks):
    loss = F.cross_entropy(logits, masks)
    pixel_acc = (logits.argmax(1) == masks).float().mean()
    return loss, pixel_acc

epoch_acc = 0.0
for images, masks in loader:
    loss, pixel_acc = seg_loss(net(images), masks)
    opt.zero_grad()
    loss.backward()
    opt.step()
    epoch_acc += pixel_acc
print(epoch_acc / len(loader))
"""
    ),
    # 14. the tracker is handed plain numbers, not the dict of loss tensors
    valid(
        """
class LossMeter:
    def __init__(self):
        self.sums = {}
        self.count = 0

    def update(self, batch_losses):
        for key in batch_losses:
            self.sums[key] = self.sums.get(key, 0.0)
            self.sums[key] += batch_losses[key]
        self.count += 1


def fit(net, optimizer, loader, meter):
    for epoch in range(3):
        for images, targets in loader:
            losses = net.losses(images, targets)
            optimizer.zero_grad()
            losses["total"].backward()
            optimizer.step()
            meter.update({key: value.item() for key, value in losses.items()})
        print(epoch, {k: float(v) / meter.count for k, v in meter.sums.items()})
"""
    ),
    # 15. the training step hands back plain numbers of its loss terms
    valid(
        """
import torch
import torch.nn.functional as F


class DetLoss:
    def __call__(self, preds, targets):
        box = (preds[:, :4] - targets[:, :4]).abs().mean()
        cls = F.binary_cross_entropy_with_logits(preds[:, 4:], targets[:, 4:])
        parts = {"box": box, "cls": cls}
        return box + cls, parts


class Trainer:
    def __init__(self, model):
        self.model = model
        self.criterion = DetLoss()
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_one_batch(self, images, targets):
        self.optimizer.zero_grad()
        loss, parts = self.criterion(self.model(images), targets)
        loss.backward()
        self.optimizer.step()
        return {name: value.item() for name, value in parts.items()}

    def train_one_epoch(self, loader):
        sums = {"box": 0.0, "cls": 0.0}
        for n, images, targets in loader:
            batch_losses = self.train_one_batch(images, targets)
            for name, value in batch_losses.items():
                sums[name] += value * n
        return sums
"""
    ),
    # the same shape, but the side metric is computed by a same-file function that returns
    # a number: nothing it returns holds a graph
    valid(
        """
import torch
import torch.nn as nn


def masked_l1(target, pred, mask):
    return ((target - pred).abs() * mask).sum() / mask.sum()


def held_out_error(target, pred, mask):
    return masked_l1(target, pred, mask).item()


class Imputer(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(3, 3)

    def step(self, batch):
        x, mask = batch
        pred = self.net(x * mask)
        loss = masked_l1(x, pred, mask)
        held_out = held_out_error(x, pred, 1 - mask)
        return loss, held_out

    def fit(self, loader, optimizer):
        total, held_out_total = 0.0, 0.0
        for batch in loader:
            loss, held_out = self.step(batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            held_out_total += held_out
        print(total, held_out_total)
"""
    ),
    # issue 8 (vit-pytorch's cats-and-dogs loop, fixed): the loss averaged as a number;
    # the accuracy is a tensor, but argmax and `==` hold no graph
    valid(
        """
import torch

for epoch in range(epochs):
    epoch_loss = 0
    epoch_accuracy = 0
    for data, label in train_loader:
        output = model(data)
        loss = criterion(output, label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        acc = (output.argmax(dim=1) == label).float().mean()
        epoch_accuracy += acc / len(train_loader)
        epoch_loss += loss.item() / len(train_loader)
    with torch.no_grad():
        epoch_val_loss = 0
        for data, label in valid_loader:
            val_loss = criterion(model(data), label)
            epoch_val_loss += val_loss / len(valid_loader)
    print(f"loss : {epoch_loss:.4f} - acc: {epoch_accuracy:.4f} - val_loss : {epoch_val_loss:.4f}")
"""
    ),
    # arithmetic on numbers cut from the loss, and on counts of correct predictions
    valid(
        """
def train_epoch(model, loader, criterion, optimizer):
    running, correct = 0.0, 0
    for images, targets in loader:
        logits = model(images)
        loss = criterion(logits, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.detach() * images.size(0) / len(loader.dataset)
        correct += (logits.argmax(1) == targets).sum() / len(loader)
    return running, correct
"""
    ),
    # a same-file epoch function returns the mean of numbers: the epoch lists hold floats
    valid(
        """
def train_epoch(train_iter, criterion, model, optimizer):
    epoch_loss_train = 0
    for story, highlight in train_iter:
        optimizer.zero_grad()
        batch_loss_train = criterion(model(story), highlight)
        batch_loss_train.backward()
        epoch_loss_train += batch_loss_train.item()
        optimizer.step()
    return epoch_loss_train / len(train_iter)


def train(train_iter, criterion, model, optimizer, num_epochs):
    train_loss = []
    for epoch in range(num_epochs):
        epoch_loss_train = train_epoch(train_iter, criterion, model, optimizer)
        train_loss.append(epoch_loss_train)
    return train_loss
"""
    ),
    # the evaluation sums of a same-file epoch function, kept in a list the caller returns
    # (whoever reads them may backpropagate them: no backward freed their graph)
    valid(
        """
def train_epoch(train_iter, test_iter, criterion, model, optimizer):
    epoch_loss_train, epoch_loss_eval = 0, 0
    model.train()
    for story, highlight in train_iter:
        optimizer.zero_grad()
        output = model(story)
        batch_loss_train = 0
        for sequence, target in zip(output, highlight):
            batch_loss_train += criterion(sequence, target)
        batch_loss_train.backward()
        epoch_loss_train += batch_loss_train.item()
        optimizer.step()
    model.eval()
    for story, highlight in test_iter:
        output = model(story)
        batch_loss_eval = 0
        for sequence, target in zip(output, highlight):
            batch_loss_eval += criterion(sequence, target)
        epoch_loss_eval += batch_loss_eval
    return epoch_loss_train / len(train_iter), epoch_loss_eval / len(test_iter)


def train(train_iter, test_iter, criterion, model, optimizer, num_epochs):
    train_loss, eval_loss = [], []
    for epoch in range(num_epochs):
        epoch_loss_train, epoch_loss_eval = train_epoch(train_iter, test_iter, criterion, model, optimizer)
        train_loss.append(epoch_loss_train)
        eval_loss.append(epoch_loss_eval)
        print("Epoch: {} | loss train: {} | loss eval: {}".format(epoch, epoch_loss_train, epoch_loss_eval))
    return train_loss, eval_loss
"""
    ),
    # the same, evaluated under no_grad: nothing is recorded
    valid(
        """
import torch

def train_epoch(train_iter, test_iter, criterion, model, optimizer):
    epoch_loss_train, epoch_loss_eval = 0, 0
    model.train()
    for story, highlight in train_iter:
        optimizer.zero_grad()
        output = model(story)
        batch_loss_train = 0
        for sequence, target in zip(output, highlight):
            batch_loss_train += criterion(sequence, target)
        batch_loss_train.backward()
        epoch_loss_train += batch_loss_train.item()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        for story, highlight in test_iter:
            output = model(story)
            batch_loss_eval = 0
            for sequence, target in zip(output, highlight):
                batch_loss_eval += criterion(sequence, target)
            epoch_loss_eval += batch_loss_eval
    return epoch_loss_train / len(train_iter), epoch_loss_eval / len(test_iter)


def train(train_iter, test_iter, criterion, model, optimizer, num_epochs):
    train_loss, eval_loss = [], []
    for epoch in range(num_epochs):
        epoch_loss_train, epoch_loss_eval = train_epoch(train_iter, test_iter, criterion, model, optimizer)
        train_loss.append(epoch_loss_train)
        eval_loss.append(epoch_loss_eval)
        print("Epoch: {} | loss train: {} | loss eval: {}".format(epoch, epoch_loss_train, epoch_loss_eval))
    return train_loss
"""
    ),
]

INVALID = [
    # 1. the FAQ example: used only as a number -> .item()
    invalid(
        """
total_loss = 0.0
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    total_loss += loss
print(f"epoch loss {total_loss / len(loader):.4f}")
""",
        """
total_loss = 0.0
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    total_loss += loss.item()
print(f"epoch loss {total_loss / len(loader):.4f}")
""",
    ),
    # 2. returned from a train_epoch function -> .detach() keeps it a tensor
    invalid(
        """
def train_epoch(model, loader, optimizer, criterion):
    model.train()
    running_loss = 0.0
    for inputs, targets in loader:
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
        running_loss += loss
    return running_loss / len(loader)
""",
        """
def train_epoch(model, loader, optimizer, criterion):
    model.train()
    running_loss = 0.0
    for inputs, targets in loader:
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
        running_loss += loss.detach()
    return running_loss / len(loader)
""",
    ),
    # 3. a list of losses, later stacked
    invalid(
        """
import torch

losses = []
for step, batch in enumerate(train_loader):
    loss = model(**batch).loss
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
    losses.append(loss)
print(torch.stack(losses).mean())
""",
        """
import torch

losses = []
for step, batch in enumerate(train_loader):
    loss = model(**batch).loss
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
    losses.append(loss.detach())
print(torch.stack(losses).mean())
""",
    ),
    # 4. weighted by batch size: the whole product is detached
    invalid(
        """
def fit(net, loader, opt, loss_fn):
    epoch_loss = 0
    for xb, yb in loader:
        loss = loss_fn(net(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad()
        epoch_loss = epoch_loss + loss * xb.size(0)
    return epoch_loss
""",
        """
def fit(net, loader, opt, loss_fn):
    epoch_loss = 0
    for xb, yb in loader:
        loss = loss_fn(net(xb), yb)
        loss.backward()
        opt.step()
        opt.zero_grad()
        epoch_loss = epoch_loss + (loss * xb.size(0)).detach()
    return epoch_loss
""",
    ),
    # 5. a metrics dict: entries of a dict accumulated
    invalid(
        """
from collections import defaultdict

def train(model, loader, optimizer):
    stats = defaultdict(float)
    for batch in loader:
        recon, kl = model.losses(batch)
        loss = recon + kl
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        stats["loss"] += loss
    return stats
""",
        """
from collections import defaultdict

def train(model, loader, optimizer):
    stats = defaultdict(float)
    for batch in loader:
        recon, kl = model.losses(batch)
        loss = recon + kl
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        stats["loss"] += loss.detach()
    return stats
""",
    ),
    # 6. history of dicts (step outputs kept)
    invalid(
        """
history = []
for epoch in range(epochs):
    for x, y in loader:
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        history.append({"epoch": epoch, "loss": loss})
""",
        """
history = []
for epoch in range(epochs):
    for x, y in loader:
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        history.append({"epoch": epoch, "loss": loss.detach()})
""",
    ),
    # 7. AMP, and the per-component loss feeding the total
    invalid(
        """
import torch

def train(model, loader, optimizer, scaler, criterion):
    ce_total = 0.0
    for images, labels in loader:
        with torch.autocast("cuda"):
            logits = model(images)
            ce = criterion(logits, labels)
            loss = ce + 0.01 * model.l2()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        ce_total += ce
    return ce_total
""",
        """
import torch

def train(model, loader, optimizer, scaler, criterion):
    ce_total = 0.0
    for images, labels in loader:
        with torch.autocast("cuda"):
            logits = model(images)
            ce = criterion(logits, labels)
            loss = ce + 0.01 * model.l2()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        ce_total += ce.detach()
    return ce_total
""",
    ),
    # 8. the running loss of the CIFAR tutorial, reset inside an if, printed
    invalid(
        """
running_loss = 0.0
for i, (inputs, labels) in enumerate(trainloader):
    optimizer.zero_grad()
    outputs = net(inputs)
    loss = criterion(outputs, labels)
    loss.backward()
    optimizer.step()
    running_loss += loss
    if i % 2000 == 1999:
        print(f"[{i + 1:5d}] loss: {running_loss / 2000:.3f}")
        running_loss = 0.0
""",
        """
running_loss = 0.0
for i, (inputs, labels) in enumerate(trainloader):
    optimizer.zero_grad()
    outputs = net(inputs)
    loss = criterion(outputs, labels)
    loss.backward()
    optimizer.step()
    running_loss += loss.item()
    if i % 2000 == 1999:
        print(f"[{i + 1:5d}] loss: {running_loss / 2000:.3f}")
        running_loss = 0.0
""",
    ),
    # 9. model outputs kept for epoch metrics
    invalid(
        """
import torch.nn.functional as F

all_logits = []
for x, y in train_loader:
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    all_logits.append(logits)
auroc = compute_auroc(torch.cat(all_logits))
""",
        """
import torch.nn.functional as F

all_logits = []
for x, y in train_loader:
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    all_logits.append(logits.detach())
auroc = compute_auroc(torch.cat(all_logits))
""",
    ),
    # issue 8: a Hugging Face-style output whose `.loss` is itself backpropagated
    invalid(
        """
import torch


def train_epoch(model, loader, optimizer):
    model.train()
    total_loss = 0
    for batch in loader:
        outputs = model(**batch)
        outputs.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        total_loss += outputs.loss
    return total_loss / len(loader)
""",
        """
import torch


def train_epoch(model, loader, optimizer):
    model.train()
    total_loss = 0
    for batch in loader:
        outputs = model(**batch)
        outputs.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        total_loss += outputs.loss.detach()
    return total_loss / len(loader)
""",
    ),
    # issue 8: a detection criterion's dict of loss terms, summed into the loss
    invalid(
        """
import torch


def train_one_epoch(model, criterion, data_loader, optimizer):
    model.train()
    running = {"box": 0.0, "cls": 0.0}
    for images, targets in data_loader:
        outputs = model(images)
        losses = criterion(outputs, targets)
        loss = losses["box"] + losses["cls"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running["box"] += losses["box"]
        running["cls"] += losses["cls"]
    return running
""",
        """
import torch


def train_one_epoch(model, criterion, data_loader, optimizer):
    model.train()
    running = {"box": 0.0, "cls": 0.0}
    for images, targets in data_loader:
        outputs = model(images)
        losses = criterion(outputs, targets)
        loss = losses["box"] + losses["cls"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running["box"] += losses["box"].detach()
        running["cls"] += losses["cls"].detach()
    return running
""",
    ),
    # issue 8: a step's output dict, whose "loss" was backpropagated, kept for the epoch:
    # report only (which of its items are tensors is not known)
    invalid(
        """
import torch


class Trainer:
    def __init__(self, model, optimizer, criterion):
        self.model = model
        self.optimizer = optimizer
        self.criterion = criterion

    def training_step(self, batch):
        x, y = batch
        logits = self.model(x)
        loss = self.criterion(logits, y)
        return {"loss": loss, "logits": logits}

    def fit(self, loader):
        epoch_outputs = []
        for batch in loader:
            out = self.training_step(batch)
            self.optimizer.zero_grad()
            out["loss"].backward()
            self.optimizer.step()
            epoch_outputs.append(out)
        return epoch_outputs
""",
    ),
    # issue 8: a same-file step returns a dict whose only graph-carrying item is the
    # backpropagated loss (the others are `.item()`s and numbers): detach that item
    invalid(
        """
import torch.nn as nn
import torch.nn.functional as F


class DepthModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Conv2d(3, 1, 3, padding=1)

    def training_step(self, sample, *args):
        depth = self.net(sample["image"])
        loss = F.l1_loss(depth, sample["target"])
        return {"loss": loss, "logs": {"l1": loss.item()}, "count": 1}


class Trainer:
    def run_epoch(self, train_loader, model, opt):
        history = []
        for step, sample in enumerate(train_loader):
            result = model.training_step(sample, step)
            result["loss"].backward()
            opt.step()
            opt.zero_grad()
            # keep the step's output for the epoch summary
            history.append(result)
        return history
""",
        """
import torch.nn as nn
import torch.nn.functional as F


class DepthModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Conv2d(3, 1, 3, padding=1)

    def training_step(self, sample, *args):
        depth = self.net(sample["image"])
        loss = F.l1_loss(depth, sample["target"])
        return {"loss": loss, "logs": {"l1": loss.item()}, "count": 1}


class Trainer:
    def run_epoch(self, train_loader, model, opt):
        history = []
        for step, sample in enumerate(train_loader):
            result = model.training_step(sample, step)
            result["loss"].backward()
            opt.step()
            opt.zero_grad()
            result["loss"] = result["loss"].detach()
            # keep the step's output for the epoch summary
            history.append(result)
        return history
""",
    ),
    # issue 8: the loss terms a same-file loss function returns beside the total it sums
    invalid(
        """
import torch.nn.functional as F

def multitask_loss(cls_logits, boxes, labels, target_boxes):
    box_l1 = F.smooth_l1_loss(boxes, target_boxes)
    ce = F.cross_entropy(cls_logits, labels)
    total = box_l1 + 0.5 * ce
    return total, box_l1, ce

sum_total, sum_box, sum_ce = 0.0, 0.0, 0.0
for step, (images, labels, target_boxes) in enumerate(train_loader):
    cls_logits, boxes = detector(images)
    total, box_l1, ce = multitask_loss(cls_logits, boxes, labels, target_boxes)
    optimizer.zero_grad()
    total.backward()
    optimizer.step()
    sum_box += box_l1
    sum_ce += ce
print(f"box {sum_box / len(train_loader):.3f} ce {sum_ce / len(train_loader):.3f}")
""",
        """
import torch.nn.functional as F

def multitask_loss(cls_logits, boxes, labels, target_boxes):
    box_l1 = F.smooth_l1_loss(boxes, target_boxes)
    ce = F.cross_entropy(cls_logits, labels)
    total = box_l1 + 0.5 * ce
    return total, box_l1, ce

sum_total, sum_box, sum_ce = 0.0, 0.0, 0.0
for step, (images, labels, target_boxes) in enumerate(train_loader):
    cls_logits, boxes = detector(images)
    total, box_l1, ce = multitask_loss(cls_logits, boxes, labels, target_boxes)
    optimizer.zero_grad()
    total.backward()
    optimizer.step()
    sum_box += box_l1.detach()
    sum_ce += ce.detach()
print(f"box {sum_box / len(train_loader):.3f} ce {sum_ce / len(train_loader):.3f}")
""",
    ),
    # issue 8: a loss tracker's method, called every iteration with the step's loss dict,
    # sums its items into the tracker's state (reported: which items are tensors is unknown)
    invalid(
        """
class LossMeter:
    def __init__(self):
        self.sums = {}
        self.count = 0

    def update(self, batch_losses):
        for key in batch_losses:
            self.sums[key] = self.sums.get(key, 0.0)
            self.sums[key] += batch_losses[key]
        self.count += 1


def fit(net, optimizer, loader, meter):
    for epoch in range(3):
        for images, targets in loader:
            losses = net.losses(images, targets)
            optimizer.zero_grad()
            losses["total"].backward()
            optimizer.step()
            meter.update(losses)
        print(epoch, {k: float(v) / meter.count for k, v in meter.sums.items()})
"""
    ),
    # issue 8: a same-file training step returns the dict of its loss terms (its backward
    # freed their graph); the epoch loop sums its items
    invalid(
        """
import torch
import torch.nn.functional as F


class DetLoss:
    def __call__(self, preds, targets):
        box = (preds[:, :4] - targets[:, :4]).abs().mean()
        cls = F.binary_cross_entropy_with_logits(preds[:, 4:], targets[:, 4:])
        parts = {"box": box, "cls": cls}
        return box + cls, parts


class Trainer:
    def __init__(self, model):
        self.model = model
        self.criterion = DetLoss()
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_one_batch(self, images, targets):
        self.optimizer.zero_grad()
        loss, parts = self.criterion(self.model(images), targets)
        loss.backward()
        self.optimizer.step()
        return parts

    def train_one_epoch(self, loader):
        sums = {"box": 0.0, "cls": 0.0}
        for n, images, targets in loader:
            batch_losses = self.train_one_batch(images, targets)
            for name, value in batch_losses.items():
                sums[name] += value * n
        return sums
""",
        """
import torch
import torch.nn.functional as F


class DetLoss:
    def __call__(self, preds, targets):
        box = (preds[:, :4] - targets[:, :4]).abs().mean()
        cls = F.binary_cross_entropy_with_logits(preds[:, 4:], targets[:, 4:])
        parts = {"box": box, "cls": cls}
        return box + cls, parts


class Trainer:
    def __init__(self, model):
        self.model = model
        self.criterion = DetLoss()
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_one_batch(self, images, targets):
        self.optimizer.zero_grad()
        loss, parts = self.criterion(self.model(images), targets)
        loss.backward()
        self.optimizer.step()
        return parts

    def train_one_epoch(self, loader):
        sums = {"box": 0.0, "cls": 0.0}
        for n, images, targets in loader:
            batch_losses = self.train_one_batch(images, targets)
            for name, value in batch_losses.items():
                sums[name] += (value * n).detach()
        return sums
""",
    ),
    # issue 8: the same tracker, and the step's dict is a same-file loss method's dict of
    # loss terms (all tensors), passed from this one call site: detach in the tracker
    invalid(
        """
import torch.nn as nn
import torch.nn.functional as F


class LossMeter:
    def __init__(self):
        self.sums = {"total": 0.0, "ce": 0.0}

    def update(self, batch_losses):
        for key in batch_losses:
            self.sums[key] += batch_losses[key]


class SegNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Conv2d(4, 3, 1)

    def forward(self, x):
        return self.head(x)

    def compute_loss(self, logits, labels):
        ce = F.cross_entropy(logits, labels)
        reg = 1e-4 * sum(p.pow(2).sum() for p in self.parameters())
        return {"total": ce + reg, "ce": ce}


def train(model, optimizer, loader, meter):
    for images, labels in loader:
        losses = model.compute_loss(model(images), labels)
        optimizer.zero_grad()
        losses["total"].backward()
        optimizer.step()
        meter.update(losses)
""",
        """
import torch.nn as nn
import torch.nn.functional as F


class LossMeter:
    def __init__(self):
        self.sums = {"total": 0.0, "ce": 0.0}

    def update(self, batch_losses):
        for key in batch_losses:
            self.sums[key] += batch_losses[key].detach()


class SegNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Conv2d(4, 3, 1)

    def forward(self, x):
        return self.head(x)

    def compute_loss(self, logits, labels):
        ce = F.cross_entropy(logits, labels)
        reg = 1e-4 * sum(p.pow(2).sum() for p in self.parameters())
        return {"total": ce + reg, "ce": ce}


def train(model, optimizer, loader, meter):
    for images, labels in loader:
        losses = model.compute_loss(model(images), labels)
        optimizer.zero_grad()
        losses["total"].backward()
        optimizer.step()
        meter.update(losses)
""",
    ),
    # a same-file step returns the backpropagated loss and a metric computed from the same
    # model output by a loss function: the metric holds a graph, and summing it keeps every
    # iteration's (the loss is summed as a number)
    invalid(
        """
import torch
import torch.nn as nn


def masked_l1(target, pred, mask):
    return ((target - pred).abs() * mask).sum() / mask.sum()


class Imputer(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(3, 3)

    def step(self, batch):
        x, mask = batch
        pred = self.net(x * mask)
        loss = masked_l1(x, pred, mask)
        held_out = masked_l1(x, pred, 1 - mask)
        return loss, held_out

    def fit(self, loader, optimizer):
        total, held_out_total = 0.0, 0.0
        for batch in loader:
            loss, held_out = self.step(batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            held_out_total += held_out
        print(total, held_out_total.item())
""",
        """
import torch
import torch.nn as nn


def masked_l1(target, pred, mask):
    return ((target - pred).abs() * mask).sum() / mask.sum()


class Imputer(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(3, 3)

    def step(self, batch):
        x, mask = batch
        pred = self.net(x * mask)
        loss = masked_l1(x, pred, mask)
        held_out = masked_l1(x, pred, 1 - mask)
        return loss, held_out

    def fit(self, loader, optimizer):
        total, held_out_total = 0.0, 0.0
        for batch in loader:
            loss, held_out = self.step(batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            held_out_total += held_out.detach()
        print(total, held_out_total.item())
""",
    ),
    # issue 8 (vit-pytorch's cats-and-dogs loop): the loss averaged over the loader keeps
    # each batch's graph (`len()` cuts nothing of `loss`); the accuracy carries none
    invalid(
        """
import torch

for epoch in range(epochs):
    epoch_loss = 0
    epoch_accuracy = 0
    for data, label in train_loader:
        output = model(data)
        loss = criterion(output, label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        acc = (output.argmax(dim=1) == label).float().mean()
        epoch_accuracy += acc / len(train_loader)
        epoch_loss += loss / len(train_loader)
    print(f"loss : {epoch_loss:.4f} - acc: {epoch_accuracy:.4f}")
""",
        """
import torch

for epoch in range(epochs):
    epoch_loss = 0
    epoch_accuracy = 0
    for data, label in train_loader:
        output = model(data)
        loss = criterion(output, label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        acc = (output.argmax(dim=1) == label).float().mean()
        epoch_accuracy += acc / len(train_loader)
        epoch_loss += (loss / len(train_loader)).item()
    print(f"loss : {epoch_loss:.4f} - acc: {epoch_accuracy:.4f}")
""",
    ),
    # the mean of two loss terms, each fed into the backpropagated total, scaled by the
    # batch's share of the dataset; the sum is returned: `.detach()`
    invalid(
        """
import torch.nn.functional as F


def train_epoch(model, loader, optimizer):
    epoch_loss = 0.0
    for x, y in loader:
        recon, logits = model(x)
        rec = F.mse_loss(recon, x)
        ce = F.cross_entropy(logits, y)
        loss = rec + ce
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_loss += (rec + ce) / 2 * len(x) / len(loader.dataset)
    return epoch_loss
""",
        """
import torch.nn.functional as F


def train_epoch(model, loader, optimizer):
    epoch_loss = 0.0
    for x, y in loader:
        recon, logits = model(x)
        rec = F.mse_loss(recon, x)
        ce = F.cross_entropy(logits, y)
        loss = rec + ce
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_loss += ((rec + ce) / 2 * len(x) / len(loader.dataset)).detach()
    return epoch_loss
""",
    ),
    # issue 8 (text-summarizer): a same-file epoch function returns the sum of the losses it
    # backpropagated, and the caller keeps one per epoch: each epoch's graph stays alive
    # for the run (the sum inside the epoch is reported too)
    invalid(
        """
def train_epoch(train_iter, criterion, model, optimizer):
    epoch_loss_train, n_batches = 0, 0
    for story, highlight in train_iter:
        optimizer.zero_grad()
        batch_loss_train = criterion(model(story), highlight)
        batch_loss_train.backward()
        epoch_loss_train += batch_loss_train
        n_batches += 1
        optimizer.step()
    return epoch_loss_train / len(train_iter), n_batches


def train(train_iter, criterion, model, optimizer, num_epochs):
    train_loss = []
    for epoch in range(num_epochs):
        epoch_loss_train, n_batches = train_epoch(train_iter, criterion, model, optimizer)
        train_loss.append(epoch_loss_train)
        print("Epoch: {} | loss train: {}".format(epoch, epoch_loss_train))
    return train_loss
""",
        """
def train_epoch(train_iter, criterion, model, optimizer):
    epoch_loss_train, n_batches = 0, 0
    for story, highlight in train_iter:
        optimizer.zero_grad()
        batch_loss_train = criterion(model(story), highlight)
        batch_loss_train.backward()
        epoch_loss_train += batch_loss_train.detach()
        n_batches += 1
        optimizer.step()
    return epoch_loss_train / len(train_iter), n_batches


def train(train_iter, criterion, model, optimizer, num_epochs):
    train_loss = []
    for epoch in range(num_epochs):
        epoch_loss_train, n_batches = train_epoch(train_iter, criterion, model, optimizer)
        train_loss.append(epoch_loss_train.detach())
        print("Epoch: {} | loss train: {}".format(epoch, epoch_loss_train))
    return train_loss
""",
    ),
    # issue 8 (text-summarizer): the evaluation loop of the same epoch function sums losses
    # of the model it trains, with grad on and no backward: each epoch's evaluation graph,
    # activations included, is kept by a list nothing reads back
    invalid(
        """
def train_epoch(train_iter, test_iter, criterion, model, optimizer):
    epoch_loss_train, epoch_loss_eval = 0, 0
    model.train()
    for story, highlight in train_iter:
        optimizer.zero_grad()
        output = model(story)
        batch_loss_train = 0
        for sequence, target in zip(output, highlight):
            batch_loss_train += criterion(sequence, target)
        batch_loss_train.backward()
        epoch_loss_train += batch_loss_train.item()
        optimizer.step()
    model.eval()
    for story, highlight in test_iter:
        output = model(story)
        batch_loss_eval = 0
        for sequence, target in zip(output, highlight):
            batch_loss_eval += criterion(sequence, target)
        epoch_loss_eval += batch_loss_eval
    return epoch_loss_train / len(train_iter), epoch_loss_eval / len(test_iter)


def train(train_iter, test_iter, criterion, model, optimizer, num_epochs):
    train_loss, eval_loss = [], []
    for epoch in range(num_epochs):
        epoch_loss_train, epoch_loss_eval = train_epoch(train_iter, test_iter, criterion, model, optimizer)
        train_loss.append(epoch_loss_train)
        eval_loss.append(epoch_loss_eval)
        print("Epoch: {} | loss train: {} | loss eval: {}".format(epoch, epoch_loss_train, epoch_loss_eval))
    return train_loss
""",
        """
def train_epoch(train_iter, test_iter, criterion, model, optimizer):
    epoch_loss_train, epoch_loss_eval = 0, 0
    model.train()
    for story, highlight in train_iter:
        optimizer.zero_grad()
        output = model(story)
        batch_loss_train = 0
        for sequence, target in zip(output, highlight):
            batch_loss_train += criterion(sequence, target)
        batch_loss_train.backward()
        epoch_loss_train += batch_loss_train.item()
        optimizer.step()
    model.eval()
    for story, highlight in test_iter:
        output = model(story)
        batch_loss_eval = 0
        for sequence, target in zip(output, highlight):
            batch_loss_eval += criterion(sequence, target)
        epoch_loss_eval += batch_loss_eval
    return epoch_loss_train / len(train_iter), epoch_loss_eval / len(test_iter)


def train(train_iter, test_iter, criterion, model, optimizer, num_epochs):
    train_loss, eval_loss = [], []
    for epoch in range(num_epochs):
        epoch_loss_train, epoch_loss_eval = train_epoch(train_iter, test_iter, criterion, model, optimizer)
        train_loss.append(epoch_loss_train)
        eval_loss.append(epoch_loss_eval.detach())
        print("Epoch: {} | loss train: {} | loss eval: {}".format(epoch, epoch_loss_train, epoch_loss_eval))
    return train_loss
""",
    ),
]
