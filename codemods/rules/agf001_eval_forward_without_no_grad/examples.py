"""VALID / INVALID examples of `agf001_eval_forward_without_no_grad` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. the classic MNIST test(): already under no_grad
    valid(
        """
import torch
import torch.nn.functional as F

def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
    return test_loss / len(test_loader.dataset)
"""
    ),
    # 2. decorator with an alias
    valid(
        """
import torch as T

@T.no_grad()
def evaluate(model, val_loader):
    model.eval()
    return [model(x) for x, _ in val_loader]
"""
    ),
    # 3. inference_mode, imported by name
    valid(
        """
from torch import inference_mode

@inference_mode()
def predict(model, loader):
    model.eval()
    outs = []
    for batch in loader:
        outs.append(model(batch))
    return outs
"""
    ),
    # 4. saliency map: eval mode, but gradients w.r.t. the input are the goal
    valid(
        """
import torch

def saliency(model, image, label):
    model.eval()
    image = image.clone().requires_grad_(True)
    score = model(image)[0, label]
    score.backward()
    return image.grad.abs().amax(dim=1)
"""
    ),
    # 5. FGSM adversarial examples on the test set
    valid(
        """
import torch
import torch.nn.functional as F

def test_fgsm(model, test_loader, epsilon):
    model.eval()
    correct = 0
    for data, target in test_loader:
        data.requires_grad = True
        output = model(data)
        loss = F.nll_loss(output, target)
        model.zero_grad()
        loss.backward()
        perturbed = data + epsilon * data.grad.sign()
        correct += (model(perturbed).argmax(1) == target).sum().item()
    return correct
"""
    ),
    # 6. a training loop
    valid(
        """
import torch

def train_one_epoch(model, train_loader, optimizer, criterion):
    model.train()
    for inputs, targets in train_loader:
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
"""
    ),
    # 7. Lightning already runs validation_step under no_grad
    valid(
        """
import torch
import pytorch_lightning as pl

class LitClassifier(pl.LightningModule):
    def forward(self, x):
        return self.net(x)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", torch.nn.functional.cross_entropy(logits, y))
"""
    ),
    # 8. a caller in the same file already disables grad
    valid(
        """
import torch

def run_validation(model, val_loader):
    model.eval()
    return sum(model(x).sum().item() for x in val_loader)

def main(model, val_loader):
    with torch.no_grad():
        print(run_validation(model, val_loader))
"""
    ),
    # 9. gradient penalty (WGAN-GP) during evaluation uses torch.autograd.grad
    valid(
        """
import torch

def evaluate_critic(critic, real, fake):
    critic.eval()
    alpha = torch.rand(real.size(0), 1, 1, 1)
    mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    scores = critic(mixed)
    grads = torch.autograd.grad(scores.sum(), mixed, create_graph=True)[0]
    return ((grads.norm(2, dim=1) - 1) ** 2).mean()
"""
    ),
    # 10. test-time training: an optimizer steps inside the test loop
    valid(
        """
import torch

def test_time_adapt(model, test_loader, optimizer):
    model.eval()
    for x in test_loader:
        loss = model(x).softmax(1).mul(-1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""
    ),
    # 11. a helper that training code in the same file calls
    valid(
        """
import torch

def predict(model, x):
    return model(x)

def train_step(model, x, y, optimizer):
    loss = torch.nn.functional.mse_loss(predict(model, x), y)
    loss.backward()
    optimizer.step()
"""
    ),
    # 12. set_grad_enabled(False) around a while-next loop
    valid(
        """
import torch

def evaluate(model, val_loader):
    model.eval()
    it = iter(val_loader)
    with torch.set_grad_enabled(False):
        while True:
            try:
                batch = next(it)
            except StopIteration:
                break
            model(batch)
"""
    ),
    # 13. a pytest test that checks the output's grad_fn
    valid(
        """
import torch

def test_forward_shape(model):
    model.eval()
    out = model(torch.randn(2, 3))
    assert out.shape == (2, 4)
""",
        filename="tests/test_model.py",
    ),
    # 14. the validation loop's outputs are backpropagated later (distillation targets)
    valid(
        """
import torch

def fit(model, val_loader, optimizer):
    model.eval()
    outs = []
    for x in val_loader:
        outs.append(model(x))
    model.train()
    loss = torch.stack(outs).pow(2).mean()
    loss.backward()
    optimizer.step()
"""
    ),
    # 15. a Lightning callback's validation hook: Lightning's loop already disables grad
    valid(
        """
import torch
from pytorch_lightning.callbacks import Callback

class EMASwap(Callback):
    def on_validation_epoch_start(self, trainer, pl_module):
        pl_module.eval()
        for batch in trainer.val_dataloaders:
            pl_module(batch)
"""
    ),
    # 16. pydantic's `model_validate` in a request validator is not a forward pass
    valid(
        """
import torch

class Server:
    def _validate_request(self, body):
        request = Request.model_validate(body, strict=True)
        checked = validate_model_inputs(request)
        return checked
"""
    ),
    # 17. a library method returning the forward output: callers elsewhere may train on it
    valid(
        """
import torch
from torch import nn

class EsmModel(nn.Module):
    def predict_contacts(self, tokens, attention_mask):
        return self(tokens, attention_mask=attention_mask, return_contacts=True)["contacts"]
"""
    ),
    # 18. part of the forward itself, despite the word `prediction`
    valid(
        """
import torch
from torch import nn

class MaskHead(nn.Module):
    def forward_prediction_heads(self, output, mask_features):
        decoder_output = self.decoder_norm(output)
        return self.class_embed(decoder_output), self.mask_embed(decoder_output)
"""
    ),
    # 19. called from a pipeline's `_forward`: the framework decides the grad mode
    valid(
        """
import torch

class TableQAPipeline(Pipeline):
    def sequential_inference(self, **inputs):
        all_logits = []
        for index in range(inputs["input_ids"].shape[0]):
            all_logits.append(self.model(input_ids=inputs["input_ids"][index : index + 1]).logits)
        return torch.cat(all_logits)

    def _forward(self, model_inputs):
        return self.sequential_inference(**model_inputs)
"""
    ),
    # issue 8: `predict` averages test-time views, and `fit` backpropagates through
    # what it returns: the call's result reaches `backward`, so it is not evaluation
    valid(
        """
import torch

class MultiViewTrainer:
    def __init__(self, model, optimizer, criterion):
        self.model = model
        self.optimizer = optimizer
        self.criterion = criterion

    def predict(self, views):
        logits = [self.model(view) for view in views]
        return torch.stack(logits).mean(0)

    def fit(self, loader):
        for views, labels in loader:
            loss = self.criterion(self.predict(views), labels)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
"""
    ),
    # issue 8 (pytorch/examples distributed/rpc/batch/reinforce.py): the log-probability
    # keeps its graph for `finish_episode`'s backward, stored through an alias of the agent
    valid(
        """
import torch
from torch.distributions import Categorical


class Agent:
    def __init__(self, policy, optimizer):
        self.policy = policy
        self.optimizer = optimizer
        self.saved_log_probs = {}

    @staticmethod
    def select_action(agent_rref, ob_id, state):
        self = agent_rref.local_value()
        probs = self.policy(state)
        m = Categorical(probs)
        action = m.sample()
        self.saved_log_probs[ob_id].append(m.log_prob(action))
        return action.item()
"""
    ),
    # a pytest class's test method in a test file: pytest runs it, nobody's eval pass
    valid(
        """
import torch

class TestForecaster:
    def test_predicts_shape(self, model):
        model.eval()
        for window in torch.randn(3, 2, 8).unbind(0):
            assert model(window).shape == (2, 1)
""",
        filename="tests/test_forecaster.py",
    ),
    # issue 8: a branch that runs the model without backward in it, whose loss the
    # backward after the `if` then uses (gradient accumulation): not an evaluation pass
    valid(
        """
import torch

def train(model, loader, optimizer, criterion, accumulation_steps):
    for step, (x, y) in enumerate(loader):
        if step % accumulation_steps == 0:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
        else:
            loss = criterion(model(x), y)
        loss.backward()
        if (step + 1) % accumulation_steps == 0:
            optimizer.step()
"""
    ),
    # issue 8: the same-file caller of a model-returning helper trains on what it returns
    valid(
        """
import torch
from torch import nn

def infer(mod, batch):
    return mod(batch)

net = nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for batch in torch.randn(5, 8, 4):
    loss = infer(net, batch).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
    ),
    # issue 8: evaluation through a model method, but input gradients are the goal
    valid(
        """
import torch

def eval_saliency(loader, model):
    model.eval()
    maps = []
    for batch in loader:
        image = batch["image"].requires_grad_(True)
        model.segment(image).sum().backward()
        maps.append(image.grad.abs())
    return maps
"""
    ),
    # issue 8: the trainer's forward helper is called under no_grad by the validation
    valid(
        """
import torch

class Trainer:
    def __init__(self, model, val_loader):
        self.model = model
        self.val_loader = val_loader

    def _outputs(self, batch):
        return {"logits": self.model(batch["x"])}

    def validate(self):
        self.model.eval()
        correct = 0
        for batch in self.val_loader:
            with torch.no_grad():
                out = self._outputs(batch)
            correct += (out["logits"].argmax(-1) == batch["y"]).sum().item()
        return correct
"""
    ),
    # issue 8: an evaluation step handed to a runner that disables grad itself (a callback)
    valid(
        """
import torch

class Module(torch.nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def _shared_step(self, batch):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch):
        self.last_val = self._shared_step(batch).item()


def run_eval(model, loader, step):
    with torch.no_grad():
        for batch in loader:
            step(batch)


def main(model, loader):
    run_eval(model, loader, model.validation_step)
"""
    ),
    # issue 8 (pytorch/examples word_language_model): the forward is under no_grad; the
    # model method outside it only sets up the hidden state
    valid(
        """
import torch

def evaluate(model, data_source, criterion, eval_batch_size):
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for data, targets in data_source:
            output, hidden = model(data, hidden)
            total_loss += criterion(output, targets).item()
    return total_loss / len(data_source)
"""
    ),
    # issue 8 (Lightning's test helpers): a test-named helper that trains the model through
    # a trainer this file cannot see, then reads its loaders through model methods
    valid(
        """
import torch

def run_model_test(trainer, model, min_acc=0.25):
    trainer.fit(model)
    loaders = model.test_dataloader()
    return [len(loader) for loader in loaders]
"""
    ),
    # audit (transformers' Trainer): evaluate -> evaluation_loop -> prediction_step, which
    # runs the model under its own `with torch.no_grad():` and returns what it computed
    valid(
        """
import torch

class Trainer:
    def __init__(self, model):
        self.model = model

    def prediction_step(self, model, inputs):
        with torch.no_grad():
            outputs = model(**inputs)
            loss = outputs["loss"].detach().mean()
        return loss, outputs["logits"]

    def evaluation_loop(self, dataloader):
        self.model.eval()
        losses = []
        for inputs in dataloader:
            loss, logits = self.prediction_step(self.model, inputs)
            losses.append(loss)
        return torch.stack(losses).mean().item()

    def evaluate(self, eval_dataloader):
        return {"eval_loss": self.evaluation_loop(eval_dataloader)}
"""
    ),
    # audit (Lightning's ModelCheckpoint.to_yaml): a dict named `*_models` holds scores;
    # reading its items runs no model
    valid(
        """
import os
import torch
import yaml

class ModelCheckpoint:
    def to_yaml(self, filepath=None):
        best_k = {k: v.item() for k, v in self.best_k_models.items()}
        if filepath is None:
            filepath = os.path.join(self.dirpath, "best_k_models.yaml")
        with open(filepath, "w") as fp:
            yaml.dump(best_k, fp)
"""
    ),
    # audit (transformers' OpenVINO exporter): an OpenVINO graph, by its annotation, is no
    # torch model whatever it is called
    valid(
        """
import openvino
import torch

def _use_numpy_broadcasts(ov_model: openvino.Model) -> None:
    for node in ov_model.get_ordered_ops():
        if node.get_type_name() != "Broadcast":
            continue
        node.output(0).replace(node.input_value(0))
    ov_model.validate_nodes_and_infer_types()
"""
    ),
    # audit (transformers' modeling_utils): looking a tensor up on a model runs no forward
    # a dict of models whose items are put in eval mode, but the step trains them: its
    # `self.nets[...]` forwards reach a backward
    valid(
        """
import torch

def remove_tied_weights_from_state_dict(state_dict, model):
    kept = {}
    for name, tensor in state_dict.items():
        if model.get_parameter_or_buffer(name) is not tensor:
            kept[name] = tensor
    return kept
class GANTrainer:
    def __init__(self, nets, optimizers):
        self.nets = nets
        self.optimizers = optimizers

    def _train_step(self, inputs, target):
        fake = self.nets["gen"](inputs)
        loss = (fake - target).abs().mean()
        self.optimizers["gen"].zero_grad()
        loss.backward()
        self.optimizers["gen"].step()

    def _train_epoch(self, loader):
        for name in self.nets.keys():
            self.nets[name].train()
        for inputs, target in loader:
            self._train_step(inputs, target)

    def _dev_epoch(self, loader):
        for name in self.nets.keys():
            self.nets[name].eval()
        total = 0.0
        with torch.no_grad():
            for inputs, target in loader:
                total += (self.nets["gen"](inputs) - target).abs().mean().item()
        return total
"""
    ),
    # the same script shape, but the file fine-tunes the model after either branch: the
    # outputs of the eval-mode forward feed a gradient (test-time adaptation)
    valid(
        """
import sys

import torch
import torch.nn as nn


if __name__ == "__main__":
    net = nn.Conv2d(3, 3, 3, padding=1)
    net.eval()
    image = torch.rand(1, 3, 8, 8)
    if sys.argv[-1] == "adapt":
        restored = net(image)
    else:
        restored = net(image)
        print(restored.mean().item())
    restored.pow(2).mean().backward()
"""
    ),
    # a generation script: the model's own `init_hidden` in a branch is set-up, and the
    # script runs its forward under `no_grad` itself
    valid(
        """
import torch

model = torch.load("model.pt")
model.eval()
if not getattr(model, "is_transformer", False):
    hidden = model.init_hidden(1)
tokens = torch.zeros(1, 1, dtype=torch.long)
with torch.no_grad():
    for _ in range(10):
        output, hidden = model(tokens, hidden)
        tokens.fill_(int(output.argmax()))
"""
    ),
    # F1 near-miss: `G` in eval mode (frozen BatchNorm) still feeds the discriminator's
    # backward; `Generator(...)` is a constructor, not a forward
    valid(
        """
import torch
import torch.nn as nn


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8))

    def forward(self, z):
        return self.net(z)


G = Generator()
D = nn.Linear(8, 1)
opt_D = torch.optim.Adam(D.parameters())


def train_discriminator(z):
    G.eval()
    fake = G(z)
    loss = D(fake).mean()
    opt_D.zero_grad()
    loss.backward()
    opt_D.step()
"""
    ),
    # F2 near-miss: `.data` is cut for the log, but the output itself is returned
    valid(
        """
import torch
import torch.nn as nn

generator = nn.Sequential(nn.Linear(100, 784), nn.Tanh())
history = []


def generate(z):
    images = generator(z)
    history.append(images.data.mean())
    return images
"""
    ),
    # F3 near-miss: the caller's loop runs over what the helper returns and backpropagates it
    valid(
        """
import torch


def outputs(model, loader):
    model.eval()
    outs = []
    for x in loader:
        outs.append(model(x).argmax(1).float() + model(x).mean())
    return outs


def tune(model, loader, optimizer):
    for out in outputs(model, loader):
        optimizer.zero_grad()
        out.sum().backward()
        optimizer.step()
"""
    ),
    # F11 near-miss: `Variable(x, requires_grad=True)` asks for the input's gradient
    valid(
        """
import torch
from torch.autograd import Variable


def predict_with_inputs(model, loader):
    model.eval()
    for x, _ in loader:
        x = Variable(x, requires_grad=True)
        yield x, model(x)
"""
    ),
    # F10 near-miss: the eval-mode output is trained on later in the same iteration
    valid(
        """
import torch


def train(student, teacher, loader, optimizer):
    for x in loader:
        teacher.eval()
        target = teacher(x)
        loss = (student(x) - target).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""
    ),
]

INVALID = [
    # 1. segmentation validation function: decorate (returns a value -> unsafe fix)
    invalid(
        """
import torch

def validate(model, val_loader, criterion):
    model.eval()
    total = 0.0
    for images, masks in val_loader:
        logits = model(images)
        total += criterion(logits, masks).item()
    return total / len(val_loader)
""",
        """
import torch

@torch.no_grad()
def validate(model, val_loader, criterion):
    model.eval()
    total = 0.0
    for images, masks in val_loader:
        logits = model(images)
        total += criterion(logits, masks).item()
    return total / len(val_loader)
""",
    ),
    # 2. train and validate in one function: wrap only the validation loop
    invalid(
        """
import torch

def fit(model, train_loader, val_loader, optimizer, criterion, epochs):
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        model.eval()
        # validation
        val_loss = 0.0
        for x, y in val_loader:
            val_loss += criterion(model(x), y).item()
        print(epoch, val_loss)
""",
        """
import torch

def fit(model, train_loader, val_loader, optimizer, criterion, epochs):
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        model.eval()
        # validation
        val_loss = 0.0
        with torch.no_grad():
            for x, y in val_loader:
                val_loss += criterion(model(x), y).item()
        print(epoch, val_loss)
""",
    ),
    # 3. alias `import torch as T`
    invalid(
        """
import torch as T

def evaluate(net, loader):
    net.eval()
    for x in loader:
        net(x)
""",
        """
import torch as T

@T.no_grad()
def evaluate(net, loader):
    net.eval()
    for x in loader:
        net(x)
""",
    ),
    # 4. `from torch import no_grad` is reused
    invalid(
        """
from torch import no_grad, nn

def run_inference(model: nn.Module, batches):
    model.eval()
    for batch in batches:
        model(batch)
""",
        """
from torch import no_grad, nn

@no_grad()
def run_inference(model: nn.Module, batches):
    model.eval()
    for batch in batches:
        model(batch)
""",
    ),
    # 5. no `import torch` yet: it is added
    invalid(
        """
def evaluate(model, loader):
    model.eval()
    for x in loader:
        model(x)
""",
        """
import torch


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    for x in loader:
        model(x)
""",
    ),
    # 6. `while True: next(it)` over a validation iterator in a script
    invalid(
        """
import torch

model = torch.nn.Linear(4, 2)
model.eval()
val_iter = iter([torch.randn(3, 4) for _ in range(5)])
logits = []
while True:
    try:
        batch = next(val_iter)
    except StopIteration:
        break
    logits.append(model(batch))
""",
        """
import torch

model = torch.nn.Linear(4, 2)
model.eval()
val_iter = iter([torch.randn(3, 4) for _ in range(5)])
logits = []
with torch.no_grad():
    while True:
        try:
            batch = next(val_iter)
        except StopIteration:
            break
        logits.append(model(batch))
""",
    ),
    # 7. a trainer's evaluate method (HF-style batches)
    invalid(
        """
import torch

class Trainer:
    def __init__(self, model, eval_dataloader):
        self.model = model
        self.eval_dataloader = eval_dataloader

    def evaluate(self):
        self.model.eval()
        losses = []
        for batch in self.eval_dataloader:
            outputs = self.model(**batch)
            losses.append(outputs.loss)
        return torch.stack(losses).mean()
""",
        """
import torch

class Trainer:
    def __init__(self, model, eval_dataloader):
        self.model = model
        self.eval_dataloader = eval_dataloader

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        losses = []
        for batch in self.eval_dataloader:
            outputs = self.model(**batch)
            losses.append(outputs.loss)
        return torch.stack(losses).mean()
""",
    ),
    # 8. Lightning-style step in a hand-written loop (not a LightningModule)
    invalid(
        """
import torch
from torch import nn

class Seq2Seq(nn.Module):
    def forward(self, src):
        return self.decoder(self.encoder(src))

    def validation_step(self, batch):
        src, tgt = batch
        logits = self(src)
        return nn.functional.cross_entropy(logits, tgt).item()
""",
        """
import torch
from torch import nn

class Seq2Seq(nn.Module):
    def forward(self, src):
        return self.decoder(self.encoder(src))

    @torch.no_grad()
    def validation_step(self, batch):
        src, tgt = batch
        logits = self(src)
        return nn.functional.cross_entropy(logits, tgt).item()
""",
    ),
    # 9. nested loops: only the outer loop is wrapped; comments stay
    invalid(
        """
import torch

def main(detector, loaders):
    detector.eval()
    results = {}
    for name, test_loader in loaders.items():  # one loader per split
        for images, boxes in test_loader:
            # forward only
            results.setdefault(name, []).append(detector(images))
    return results
""",
        """
import torch

def main(detector, loaders):
    detector.eval()
    results = {}
    with torch.no_grad():
        for name, test_loader in loaders.items():  # one loader per split
            for images, boxes in test_loader:
                # forward only
                results.setdefault(name, []).append(detector(images))
    return results
""",
    ),
    # 10. a loop over a validation loader inside a larger script function (no eval())
    invalid(
        """
import torch

def report(model, val_loader, history):
    history.append("epoch done")
    correct = 0
    for x, y in enumerate(val_loader):
        correct += (model(x).argmax(-1) == y).sum().item()
    history.append(correct)
""",
        """
import torch

def report(model, val_loader, history):
    history.append("epoch done")
    correct = 0
    with torch.no_grad():
        for x, y in enumerate(val_loader):
            correct += (model(x).argmax(-1) == y).sum().item()
    history.append(correct)
""",
    ),
    # 11. a predict method with other decorators: no_grad goes innermost
    invalid(
        """
import functools
import torch

class Classifier(torch.nn.Module):
    @functools.lru_cache(maxsize=None)
    def predict_proba(self, x):
        self.eval()
        return self.forward(x).softmax(-1)
""",
        """
import functools
import torch

class Classifier(torch.nn.Module):
    @functools.lru_cache(maxsize=None)
    @torch.no_grad()
    def predict_proba(self, x):
        self.eval()
        return self.forward(x).softmax(-1)
""",
    ),
    # 12. inference_mode(False) does not disable grad
    invalid(
        """
import torch

def infer(model, test_loader):
    model.eval()
    with torch.inference_mode(False):
        for x in test_loader:
            model(x)
""",
        """
import torch

@torch.no_grad()
def infer(model, test_loader):
    model.eval()
    with torch.inference_mode(False):
        for x in test_loader:
            model(x)
""",
    ),
    # 13. module-level script after model.eval() with a docstring: import goes after it
    invalid(
        '''
"""Evaluate a checkpoint."""
from mypkg import build_model, val_loader

model = build_model()
model.eval()
for x, y in val_loader:
    print(model(x).argmax(1).eq(y).float().mean())
''',
        '''
"""Evaluate a checkpoint."""
import torch
from mypkg import build_model, val_loader

model = build_model()
model.eval()
with torch.no_grad():
    for x, y in val_loader:
        print(model(x).argmax(1).eq(y).float().mean())
''',
    ),
    # issue 8: reading `requires_grad` in a debug print is not a gradient use
    invalid(
        """
import torch

def evaluate(model, val_loader, device):
    model.eval()
    correct = 0
    for step, (images, labels) in enumerate(val_loader):
        images, labels = images.to(device), labels.to(device)
        logits = model(images)
        if step == 0:
            print("logits require grad:", logits.requires_grad)
        correct += (logits.argmax(1) == labels).sum().item()
    return correct / len(val_loader.dataset)
""",
        """
import torch

@torch.no_grad()
def evaluate(model, val_loader, device):
    model.eval()
    correct = 0
    for step, (images, labels) in enumerate(val_loader):
        images, labels = images.to(device), labels.to(device)
        logits = model(images)
        if step == 0:
            print("logits require grad:", logits.requires_grad)
        correct += (logits.argmax(1) == labels).sum().item()
    return correct / len(val_loader.dataset)
""",
    ),
    # issue 8 (pytorch/examples language_translation): `main` trains and also calls
    # `validate`, but what `validate` returns only picks the checkpoint: its forward
    # passes never reach `backward`
    invalid(
        """
import torch

def train(model, train_dl, loss_fn, optim):
    model.train()
    losses = 0
    for src, tgt in train_dl:
        logits = model(src, tgt[:-1, :])
        optim.zero_grad()
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt[1:, :].reshape(-1))
        loss.backward()
        optim.step()
        losses += loss.item()
    return losses / len(list(train_dl))

def validate(model, valid_dl, loss_fn):
    losses = 0
    model.eval()
    for src, tgt in valid_dl:
        logits = model(src, tgt[:-1, :])
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt[1:, :].reshape(-1))
        losses += loss.item()
    return losses / len(list(valid_dl))

def main(model, train_dl, valid_dl, opts):
    loss_fn = torch.nn.CrossEntropyLoss()
    optim = torch.optim.Adam(model.parameters(), lr=opts.lr)
    best_val_loss = 1e6
    for epoch in range(1, opts.epochs + 1):
        train_loss = train(model, train_dl, loss_fn, optim)
        val_loss = validate(model, valid_dl, loss_fn)
        if val_loss < best_val_loss:
            best_val_loss = val_loss
            torch.save(model.state_dict(), opts.logging_dir + "best.pt")
""",
        """
import torch

def train(model, train_dl, loss_fn, optim):
    model.train()
    losses = 0
    for src, tgt in train_dl:
        logits = model(src, tgt[:-1, :])
        optim.zero_grad()
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt[1:, :].reshape(-1))
        loss.backward()
        optim.step()
        losses += loss.item()
    return losses / len(list(train_dl))

@torch.no_grad()
def validate(model, valid_dl, loss_fn):
    losses = 0
    model.eval()
    for src, tgt in valid_dl:
        logits = model(src, tgt[:-1, :])
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt[1:, :].reshape(-1))
        losses += loss.item()
    return losses / len(list(valid_dl))

def main(model, train_dl, valid_dl, opts):
    loss_fn = torch.nn.CrossEntropyLoss()
    optim = torch.optim.Adam(model.parameters(), lr=opts.lr)
    best_val_loss = 1e6
    for epoch in range(1, opts.epochs + 1):
        train_loss = train(model, train_dl, loss_fn, optim)
        val_loss = validate(model, valid_dl, loss_fn)
        if val_loss < best_val_loss:
            best_val_loss = val_loss
            torch.save(model.state_dict(), opts.logging_dir + "best.pt")
""",
    ),
    # issue 8 (pytorch/examples mnist_forward_forward): `predict` runs every layer once
    # per label over the whole batch and keeps all those graphs until `argmax`, which
    # has none: the graph dies inside, so this is evaluation whatever the name says
    invalid(
        """
import torch
import torch.nn as nn
from torch.optim import Adam


def overlay_y_on_x(x, y, classes=10):
    x_ = x.clone()
    x_[:, :classes] *= 0.0
    x_[range(x.shape[0]), y] = x.max()
    return x_


class Net(torch.nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.layers = []
        for d in range(len(dims) - 1):
            self.layers = self.layers + [Layer(dims[d], dims[d + 1])]

    def predict(self, x):
        goodness_per_label = []
        for label in range(10):
            h = overlay_y_on_x(x, label)
            goodness = []
            for layer in self.layers:
                h = layer(h)
                goodness = goodness + [h.pow(2).mean(1)]
            goodness_per_label += [sum(goodness).unsqueeze(1)]
        goodness_per_label = torch.cat(goodness_per_label, 1)
        return goodness_per_label.argmax(1)

    def train(self, x_pos, x_neg):
        h_pos, h_neg = x_pos, x_neg
        for i, layer in enumerate(self.layers):
            h_pos, h_neg = layer.train(h_pos, h_neg)


class Layer(nn.Linear):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__(in_features, out_features, bias)
        self.relu = torch.nn.ReLU()
        self.opt = Adam(self.parameters(), lr=0.03)
        self.threshold = 2.0
        self.num_epochs = 3

    def forward(self, x):
        x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
        return self.relu(torch.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0))

    def train(self, x_pos, x_neg):
        for i in range(self.num_epochs):
            g_pos = self.forward(x_pos).pow(2).mean(1)
            g_neg = self.forward(x_neg).pow(2).mean(1)
            loss = torch.log1p(torch.exp(torch.cat([-g_pos + self.threshold, g_neg - self.threshold]))).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        return self.forward(x_pos).detach(), self.forward(x_neg).detach()
""",
        """
import torch
import torch.nn as nn
from torch.optim import Adam


def overlay_y_on_x(x, y, classes=10):
    x_ = x.clone()
    x_[:, :classes] *= 0.0
    x_[range(x.shape[0]), y] = x.max()
    return x_


class Net(torch.nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.layers = []
        for d in range(len(dims) - 1):
            self.layers = self.layers + [Layer(dims[d], dims[d + 1])]

    @torch.no_grad()
    def predict(self, x):
        goodness_per_label = []
        for label in range(10):
            h = overlay_y_on_x(x, label)
            goodness = []
            for layer in self.layers:
                h = layer(h)
                goodness = goodness + [h.pow(2).mean(1)]
            goodness_per_label += [sum(goodness).unsqueeze(1)]
        goodness_per_label = torch.cat(goodness_per_label, 1)
        return goodness_per_label.argmax(1)

    def train(self, x_pos, x_neg):
        h_pos, h_neg = x_pos, x_neg
        for i, layer in enumerate(self.layers):
            h_pos, h_neg = layer.train(h_pos, h_neg)


class Layer(nn.Linear):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__(in_features, out_features, bias)
        self.relu = torch.nn.ReLU()
        self.opt = Adam(self.parameters(), lr=0.03)
        self.threshold = 2.0
        self.num_epochs = 3

    def forward(self, x):
        x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
        return self.relu(torch.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0))

    def train(self, x_pos, x_neg):
        for i in range(self.num_epochs):
            g_pos = self.forward(x_pos).pow(2).mean(1)
            g_neg = self.forward(x_neg).pow(2).mean(1)
            loss = torch.log1p(torch.exp(torch.cat([-g_pos + self.threshold, g_neg - self.threshold]))).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        return self.forward(x_pos).detach(), self.forward(x_neg).detach()
""",
    ),
    # issue 8 (pytorch/examples language_translation): greedy decoding after
    # `model.eval()`; only `.item()` token ids leave the function
    invalid(
        """
import torch


def generate_square_subsequent_mask(size, device):
    mask = (torch.triu(torch.ones((size, size), device=device)) == 1).transpose(0, 1)
    return mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0)


def greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol, device):
    src = src.to(device)
    src_mask = src_mask.to(device)
    memory = model.encode(src, src_mask)
    ys = torch.ones(1, 1).fill_(start_symbol).type(torch.long).to(device)
    for _ in range(max_len - 1):
        memory = memory.to(device)
        tgt_mask = generate_square_subsequent_mask(ys.size(0), device).type(torch.bool).to(device)
        out = model.decode(ys, memory, tgt_mask)
        out = out.transpose(0, 1)
        prob = model.ff(out[:, -1])
        _, next_word = torch.max(prob, dim=1)
        next_word = next_word.item()
        ys = torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word)], dim=0)
        if next_word == end_symbol:
            break
    return ys
""",
        """
import torch


def generate_square_subsequent_mask(size, device):
    mask = (torch.triu(torch.ones((size, size), device=device)) == 1).transpose(0, 1)
    return mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0)


@torch.no_grad()
def greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol, device):
    src = src.to(device)
    src_mask = src_mask.to(device)
    memory = model.encode(src, src_mask)
    ys = torch.ones(1, 1).fill_(start_symbol).type(torch.long).to(device)
    for _ in range(max_len - 1):
        memory = memory.to(device)
        tgt_mask = generate_square_subsequent_mask(ys.size(0), device).type(torch.bool).to(device)
        out = model.decode(ys, memory, tgt_mask)
        out = out.transpose(0, 1)
        prob = model.ff(out[:, -1])
        _, next_word = torch.max(prob, dim=1)
        next_word = next_word.item()
        ys = torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word)], dim=0)
        if next_word == end_symbol:
            break
    return ys
""",
    ),
    # issue 8: a trainer's `fit` calls both steps; the validation step's own result only
    # reaches a print, so it is evaluation although its caller trains
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
        loss = self.criterion(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def validation_step(self, batch):
        x, y = batch
        logits = self.model(x)
        return self.criterion(logits, y).item()

    def fit(self, train_loader, val_loader, epochs):
        for epoch in range(epochs):
            self.model.train()
            for batch in train_loader:
                self.training_step(batch)
            self.model.eval()
            val_losses = [self.validation_step(batch) for batch in val_loader]
            print(f"epoch {epoch}: val loss {sum(val_losses) / len(val_losses):.4f}")
""",
        """
import torch


class Trainer:
    def __init__(self, model, optimizer, criterion):
        self.model = model
        self.optimizer = optimizer
        self.criterion = criterion

    def training_step(self, batch):
        x, y = batch
        loss = self.criterion(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()

    @torch.no_grad()
    def validation_step(self, batch):
        x, y = batch
        logits = self.model(x)
        return self.criterion(logits, y).item()

    def fit(self, train_loader, val_loader, epochs):
        for epoch in range(epochs):
            self.model.train()
            for batch in train_loader:
                self.training_step(batch)
            self.model.eval()
            val_losses = [self.validation_step(batch) for batch in val_loader]
            print(f"epoch {epoch}: val loss {sum(val_losses) / len(val_losses):.4f}")
""",
    ),
    # DA-RNN shape: a module's own `test()` method (not a pytest test, even in tests/)
    # runs its sub-modules batch after batch; `.detach()` right after still builds the graph
    invalid(
        """
import numpy as np
import torch
from torch import nn

class Forecaster(nn.Module):
    def __init__(self, series, window=4):
        super().__init__()
        self.series = series
        self.window = window
        self.encoder = nn.GRU(1, 8, batch_first=True)
        self.head = nn.Linear(8, 1)

    def test(self):
        preds = np.zeros(len(self.series) - self.window)
        for start in range(len(preds)):
            chunk = torch.from_numpy(self.series[start : start + self.window]).float().view(1, -1, 1)
            encoded, _ = self.encoder(chunk)
            preds[start] = self.head(encoded[:, -1]).detach().numpy()[0, 0]
        return preds
""",
        """
import numpy as np
import torch
from torch import nn

class Forecaster(nn.Module):
    def __init__(self, series, window=4):
        super().__init__()
        self.series = series
        self.window = window
        self.encoder = nn.GRU(1, 8, batch_first=True)
        self.head = nn.Linear(8, 1)

    @torch.no_grad()
    def test(self):
        preds = np.zeros(len(self.series) - self.window)
        for start in range(len(preds)):
            chunk = torch.from_numpy(self.series[start : start + self.window]).float().view(1, -1, 1)
            encoded, _ = self.encoder(chunk)
            preds[start] = self.head(encoded[:, -1]).detach().numpy()[0, 0]
        return preds
""",
        filename="tests/forecast_model.py",
    ),
    # issue 8 (particleflow shape): one function trains in one branch and evaluates in the
    # other; the evaluation branch's graph never reaches the backward (rebound first)
    invalid(
        """
import torch

def run_epoch(model, optimizer, loader, criterion, is_train):
    total = 0.0
    for x, y in loader:
        if is_train:
            out = model(x)
            loss = criterion(out, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        else:
            out = model(x)
            loss = criterion(out, y)
        total += loss.detach()
    return total.item() / len(loader)
""",
        """
import torch

def run_epoch(model, optimizer, loader, criterion, is_train):
    total = 0.0
    for x, y in loader:
        if is_train:
            out = model(x)
            loss = criterion(out, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        else:
            with torch.no_grad():
                out = model(x)
            loss = criterion(out, y)
        total += loss.detach()
    return total.item() / len(loader)
""",
    ),
    # issue 8 (torch.compile tutorial shape): `evaluate(mod, inp)` returns `mod(inp)`; the
    # only caller passes a model and the file never takes a gradient (unsafe: returns)
    invalid(
        """
import torch
from torch import nn

def evaluate(mod, inp):
    return mod(inp)

net = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
inputs = torch.randn(3, 8)
outputs = [evaluate(net, inputs) for _ in range(3)]
print(outputs[-1].sum().item())
""",
        """
import torch
from torch import nn

@torch.no_grad()
def evaluate(mod, inp):
    return mod(inp)

net = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
inputs = torch.randn(3, 8)
outputs = [evaluate(net, inputs) for _ in range(3)]
print(outputs[-1].sum().item())
""",
    ),
    # issue 8 (SAM-Adapter shape): the forward is a method of the model (`model.segment`)
    invalid(
        """
import torch

def eval_iou(loader, model):
    model.eval()
    scores = []
    for batch in loader:
        pred = torch.sigmoid(model.segment(batch["image"])) > 0.5
        scores.append((pred & batch["mask"]).sum().item() / (pred | batch["mask"]).sum().item())
    return sum(scores) / len(scores)
""",
        """
import torch

@torch.no_grad()
def eval_iou(loader, model):
    model.eval()
    scores = []
    for batch in loader:
        pred = torch.sigmoid(model.segment(batch["image"])) > 0.5
        scores.append((pred & batch["mask"]).sum().item() / (pred | batch["mask"]).sum().item())
    return sum(scores) / len(scores)
""",
    ),
    # issue 8 (fairchem shape): the forward goes through a same-file helper that returns
    # the model's output in a dict
    invalid(
        """
import torch

class Trainer:
    def __init__(self, model, val_loader):
        self.model = model
        self.val_loader = val_loader

    def _outputs(self, batch):
        return {"logits": self.model(batch["x"])}

    def validate(self):
        self.model.eval()
        correct = 0
        for batch in self.val_loader:
            out = self._outputs(batch)
            correct += (out["logits"].argmax(-1) == batch["y"]).sum().item()
        return correct
""",
        """
import torch

class Trainer:
    def __init__(self, model, val_loader):
        self.model = model
        self.val_loader = val_loader

    def _outputs(self, batch):
        return {"logits": self.model(batch["x"])}

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        correct = 0
        for batch in self.val_loader:
            out = self._outputs(batch)
            correct += (out["logits"].argmax(-1) == batch["y"]).sum().item()
        return correct
""",
    ),
    # issue 8 (end2end-asr shape): inside a train/eval function, a validation loop that
    # also prepares data and logs gets only its forward wrapped
    invalid(
        """
import torch

def fit(model, opt, train_loader, valid_loader, criterion):
    model.train()
    for x, y in train_loader:
        opt.zero_grad()
        criterion(model(x), y).backward()
        opt.step()
    model.eval()
    total = 0.0
    for x, y in valid_loader:
        x = x.float()
        pred = model(x)
        loss = criterion(pred, y)
        total += loss.item()
    print("valid loss", total / len(valid_loader))
""",
        """
import torch

def fit(model, opt, train_loader, valid_loader, criterion):
    model.train()
    for x, y in train_loader:
        opt.zero_grad()
        criterion(model(x), y).backward()
        opt.step()
    model.eval()
    total = 0.0
    for x, y in valid_loader:
        x = x.float()
        with torch.no_grad():
            pred = model(x)
        loss = criterion(pred, y)
        total += loss.item()
    print("valid loss", total / len(valid_loader))
""",
    ),
    # trainer over a dict of models: the items are put in eval mode, so `self.nets[...]`
    # calls are forwards; the step helper is the evaluation pass, not the epoch that calls it
    invalid(
        """
import torch

class GANTrainer:
    def __init__(self, nets, loss_fns, loaders):
        self.nets = nets
        self.loss_fns = loss_fns
        self.loaders = loaders
        self.dev_losses = {}

    def _dev_step(self, inputs, target):
        fake = self.nets["gen"](inputs)
        score = self.nets["disc"](fake)
        self.dev_losses["gen"] = self.loss_fns["l1"](fake, target).item()
        self.dev_losses["disc"] = score.mean().item()

    def _dev_epoch(self):
        for name in self.nets.keys():
            self.nets[name].eval()
        for inputs, target in self.loaders["dev"]:
            self._dev_step(inputs, target)
        for name in self.nets.keys():
            self.nets[name].train()
""",
        """
import torch

class GANTrainer:
    def __init__(self, nets, loss_fns, loaders):
        self.nets = nets
        self.loss_fns = loss_fns
        self.loaders = loaders
        self.dev_losses = {}

    @torch.no_grad()
    def _dev_step(self, inputs, target):
        fake = self.nets["gen"](inputs)
        score = self.nets["disc"](fake)
        self.dev_losses["gen"] = self.loss_fns["l1"](fake, target).item()
        self.dev_losses["disc"] = score.mean().item()

    def _dev_epoch(self):
        for name in self.nets.keys():
            self.nets[name].eval()
        for inputs, target in self.loaders["dev"]:
            self._dev_step(inputs, target)
        for name in self.nets.keys():
            self.nets[name].train()
""",
    ),
    # a demo script: the model is put in eval mode and each task branch runs it once; the
    # file never takes a gradient, so each branch's forward is wrapped
    invalid(
        """
import sys

import torch
import torch.nn as nn


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Conv2d(3, 3, 3, padding=1)

    def denoise(self, x):
        return x - self.body(x)

    def forward(self, x):
        return self.denoise(x)


if __name__ == "__main__":
    net = Denoiser()
    net.eval()
    image = torch.rand(1, 3, 8, 8)
    if sys.argv[-1] == "full":
        restored = net(image)
        print(restored.mean().item())
    else:
        restored = net.denoise(image)
        print(restored.clamp(0, 1).mean().item())
""",
        """
import sys

import torch
import torch.nn as nn


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Conv2d(3, 3, 3, padding=1)

    def denoise(self, x):
        return x - self.body(x)

    def forward(self, x):
        return self.denoise(x)


if __name__ == "__main__":
    net = Denoiser()
    net.eval()
    image = torch.rand(1, 3, 8, 8)
    if sys.argv[-1] == "full":
        with torch.no_grad():
            restored = net(image)
        print(restored.mean().item())
    else:
        with torch.no_grad():
            restored = net.denoise(image)
        print(restored.clamp(0, 1).mean().item())
""",
    ),
    # F1. a GAN's capitalised module instances (`G_AB`, `D_B`) are models by evidence (built
    # from nn modules, put in eval mode), not constructors because of their case
    invalid(
        """
import torch
import torch.nn as nn
from torchvision.utils import save_image

G_AB = nn.Sequential(nn.Conv2d(3, 3, 3, padding=1), nn.Tanh())
G_BA = nn.Sequential(nn.Conv2d(3, 3, 3, padding=1), nn.Tanh())


def sample_images(real_A, batches_done):
    G_AB.eval()
    G_BA.eval()
    fake_B = G_AB(real_A)
    recov_A = G_BA(fake_B)
    save_image(torch.cat((real_A, fake_B, recov_A), 0).detach(), "images/%s.png" % batches_done)
""",
        """
import torch
import torch.nn as nn
from torchvision.utils import save_image

G_AB = nn.Sequential(nn.Conv2d(3, 3, 3, padding=1), nn.Tanh())
G_BA = nn.Sequential(nn.Conv2d(3, 3, 3, padding=1), nn.Tanh())


@torch.no_grad()
def sample_images(real_A, batches_done):
    G_AB.eval()
    G_BA.eval()
    fake_B = G_AB(real_A)
    recov_A = G_BA(fake_B)
    save_image(torch.cat((real_A, fake_B, recov_A), 0).detach(), "images/%s.png" % batches_done)
""",
    ),
    # F1. `Enc1` built from a same-file nn.Module subclass: a model without `.eval()`
    invalid(
        """
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(x)


Enc1 = Encoder()


def embed_all(batches):
    codes = []
    for x in batches:
        codes.append(Enc1(x).argmax(dim=1))
    return codes
""",
        """
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(x)


Enc1 = Encoder()


@torch.no_grad()
def embed_all(batches):
    codes = []
    for x in batches:
        codes.append(Enc1(x).argmax(dim=1))
    return codes
""",
    ),
    # F2. `.data` cuts the graph like `.detach()`: the sampled images' graph dies inside
    invalid(
        """
import torch
import torch.nn as nn
from torchvision.utils import save_image

generator = nn.Sequential(nn.Linear(100, 784), nn.Tanh())


def sample_image(n_row, batches_done):
    z = torch.randn(n_row ** 2, 100)
    gen_imgs = generator(z).view(-1, 1, 28, 28)
    save_image(gen_imgs.data, "images/%d.png" % batches_done, nrow=n_row, normalize=True)
""",
        """
import torch
import torch.nn as nn
from torchvision.utils import save_image

generator = nn.Sequential(nn.Linear(100, 784), nn.Tanh())


@torch.no_grad()
def sample_image(n_row, batches_done):
    z = torch.randn(n_row ** 2, 100)
    gen_imgs = generator(z).view(-1, 1, 28, 28)
    save_image(gen_imgs.data, "images/%d.png" % batches_done, nrow=n_row, normalize=True)
""",
    ),
    # F3. a caller that trains elsewhere only compares the result in an `if` header
    invalid(
        """
import torch
import torch.nn.functional as F


def accuracy(model, loader):
    model.eval()
    correct = 0
    for x, y in loader:
        correct += (model(x).argmax(1) == y).sum().item()
    return correct / len(loader.dataset)


def fit(model, train_loader, val_loader, optimizer, epochs):
    best = 0.0
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
        if accuracy(model, val_loader) > best:
            torch.save(model.state_dict(), "best.pt")
""",
        """
import torch
import torch.nn.functional as F


def accuracy(model, loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
    return correct / len(loader.dataset)


def fit(model, train_loader, val_loader, optimizer, epochs):
    best = 0.0
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
        if accuracy(model, val_loader) > best:
            torch.save(model.state_dict(), "best.pt")
""",
    ),
    # F11. pre-0.4 code wraps batches in `Variable(...)`: without `requires_grad=True` that
    # takes no gradient, and the evaluation loop is one
    invalid(
        """
import torch
import torch.nn.functional as F
from torch.autograd import Variable


def test(model, test_loader):
    model.eval()
    correct = 0
    for data, target in test_loader:
        data, target = Variable(data), Variable(target)
        output = model(data)
        correct += output.argmax(1).eq(target).sum().item()
    print(correct / len(test_loader.dataset))
""",
        """
import torch
import torch.nn.functional as F
from torch.autograd import Variable


@torch.no_grad()
def test(model, test_loader):
    model.eval()
    correct = 0
    for data, target in test_loader:
        data, target = Variable(data), Variable(target)
        output = model(data)
        correct += output.argmax(1).eq(target).sum().item()
    print(correct / len(test_loader.dataset))
""",
    ),
    # F9. one fix, one finding: the helper's loop is wrapped; its caller, whose only graph
    # came from the helper, is not decorated as well
    invalid(
        """
import torch


def run_epoch(model, loader):
    model.eval()
    outs = []
    for x, y in loader:
        outs.append(model(x))
    return torch.cat(outs)


def report(model, loader):
    preds = run_epoch(model, loader)
    print(preds.argmax(1).bincount())
""",
        """
import torch


def run_epoch(model, loader):
    model.eval()
    outs = []
    with torch.no_grad():
        for x, y in loader:
            outs.append(model(x))
    return torch.cat(outs)


def report(model, loader):
    preds = run_epoch(model, loader)
    print(preds.argmax(1).bincount())
""",
    ),
    # F10. a sample after `G.eval()` in the training loop: every epoch's graph is kept
    invalid(
        """
import torch


def train(G, D, loader, opt_G, opt_D, fixed_z, epochs):
    samples = []
    for epoch in range(epochs):
        for real in loader:
            fake = G(torch.randn(real.size(0), 100))
            loss_D = D(real).mean() - D(fake.detach()).mean()
            opt_D.zero_grad()
            loss_D.backward()
            opt_D.step()
            loss_G = -D(fake).mean()
            opt_G.zero_grad()
            loss_G.backward()
            opt_G.step()
        if epoch % 10 == 0:
            G.eval()
            samples.append(G(fixed_z))
            G.train()
    return samples
""",
        """
import torch


def train(G, D, loader, opt_G, opt_D, fixed_z, epochs):
    samples = []
    for epoch in range(epochs):
        for real in loader:
            fake = G(torch.randn(real.size(0), 100))
            loss_D = D(real).mean() - D(fake.detach()).mean()
            opt_D.zero_grad()
            loss_D.backward()
            opt_D.step()
            loss_G = -D(fake).mean()
            opt_G.zero_grad()
            loss_G.backward()
            opt_G.step()
        if epoch % 10 == 0:
            G.eval()
            with torch.no_grad():
                samples.append(G(fixed_z))
            G.train()
    return samples
""",
    ),
    # a script that fine-tunes in one branch and only prints in the other: the printing
    # branch's graph dies there (followed in control-flow order); an unsafe wrap of it
    invalid(
        """
import sys

import torch
import torch.nn as nn


if __name__ == "__main__":
    net = nn.Conv2d(3, 3, 3, padding=1)
    net.eval()
    image = torch.rand(1, 3, 8, 8)
    if sys.argv[-1] == "adapt":
        restored = net(image)
        restored.pow(2).mean().backward()
    else:
        restored = net(image)
        print(restored.mean().item())
""",
        """
import sys

import torch
import torch.nn as nn


if __name__ == "__main__":
    net = nn.Conv2d(3, 3, 3, padding=1)
    net.eval()
    image = torch.rand(1, 3, 8, 8)
    if sys.argv[-1] == "adapt":
        restored = net(image)
        restored.pow(2).mean().backward()
    else:
        with torch.no_grad():
            restored = net(image)
        print(restored.mean().item())
""",
    ),
]
