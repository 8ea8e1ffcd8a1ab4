"""Input synthesis for function units: shapes from the layer a tensor reaches first,
targets shaped by the loss, roles from the body's evidence, the bounded search over
candidate inputs, and the caps on synthesized sizes.

The library-style cases are verified end to end (a warm worker, both sides run); the
caps and the role evidence are also checked in-process on the binder itself.
"""

from __future__ import annotations

import math
import textwrap
import types

import pytest
import torch

from autograd_fix.verification import verify_pair
from autograd_fix.verification.binding import Binder, Unbindable
from autograd_fix.verification.evidence import read_unit
from autograd_fix.verification.protocol import ExceptionRecord, RunRecord, VerifyRequest
from autograd_fix.verification.input_search import MAX_TRIALS, run_searching_inputs
from autograd_fix.verification.sandbox import Outcome
from autograd_fix.verification.shapes import MAX_BATCH, MAX_ELEMENTS, MAX_SEQUENCE, MAX_SPATIAL, entry_layers, model_plans

CNN = textwrap.dedent(
    """
    import torch
    from torch import nn
    import torch.nn.functional as F


    class SmallCNN(nn.Module):
        def __init__(self, num_classes=10):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
            self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(32 * 8 * 8, num_classes)

        def forward(self, x):
            x = self.pool(F.relu(self.conv1(x)))
            x = self.pool(F.relu(self.conv2(x)))
            return self.fc(torch.flatten(x, 1))


    def train_epoch(model, loader, optimizer, criterion):
        model.train()
        running_loss = 0.0
        for images, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
            running_loss += loss
        return running_loss / len(loader)
    """
)
CNN_FIXED = CNN.replace("running_loss += loss\n", "running_loss += loss.detach()\n")

LSTM = textwrap.dedent(
    """
    import torch
    from torch import nn


    class SentimentLSTM(nn.Module):
        def __init__(self, vocab_size=1000, embed_dim=64, hidden=128, num_classes=5):
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, embed_dim)
            self.lstm = nn.LSTM(embed_dim, hidden, batch_first=True)
            self.fc = nn.Linear(hidden, num_classes)

        def forward(self, token_ids):
            out, (h, c) = self.lstm(self.embedding(token_ids))
            return self.fc(h[-1])


    def train(model, train_loader, optimizer, loss_fn, epochs=1):
        history = []
        for _ in range(epochs):
            for token_ids, labels in train_loader:
                optimizer.zero_grad()
                loss = loss_fn(model(token_ids), labels)
                loss.backward()
                optimizer.step()
                history.append(loss)
        return history
    """
)
LSTM_FIXED = LSTM.replace("history.append(loss)", "history.append(loss.detach())")

REORDERED = textwrap.dedent(
    """
    import torch
    from torch import nn


    class BagClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Linear(32, 3)
            self.norm = nn.LayerNorm(32)
            self.embed = nn.Embedding(50, 32)

        def forward(self, ids):
            return self.head(self.norm(self.embed(ids).mean(dim=1)))


    @torch.no_grad()
    def predict(model, ids):
        return model(ids).argmax(dim=-1)


    def evaluate(model, loader):
        correct = 0
        for ids, target in loader:
            correct += (model(ids).argmax(dim=-1) == target).sum()
        return correct
    """
)
REORDERED_FIXED = REORDERED.replace(
    "    for ids, target in loader:\n        correct += (model(ids)",
    "    for ids, target in loader:\n        with torch.no_grad():\n            logits = model(ids)\n        correct += (logits",
)

CE_STEP = textwrap.dedent(
    """
    import torch
    from torch import nn
    import torch.nn.functional as F


    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 7))

        def forward(self, x):
            return F.log_softmax(self.body(x), dim=-1)


    def train_step(model, optimizer, x, labels):
        optimizer.zero_grad()
        loss = F.nll_loss(model(x), labels)
        loss.backward()
        optimizer.step()
        return loss


    def distill(student, teacher, x):
        return F.mse_loss(student(x), teacher(x).detach())
    """
)
CE_STEP_FIXED = CE_STEP.replace("    optimizer.step()\n    return loss\n", "    optimizer.step()\n    return loss.detach()\n")

BCE_STEP = textwrap.dedent(
    """
    import torch
    from torch import nn


    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1), nn.Sigmoid())

        def forward(self, x):
            return self.net(x)


    bce = nn.BCELoss()


    def discriminator_step(discriminator, optimizer, real, fake, targets):
        optimizer.zero_grad()
        loss = bce(discriminator(real), targets) + bce(discriminator(fake), 1 - targets)
        loss.backward()
        optimizer.step()
        return loss
    """
)
BCE_STEP_FIXED = BCE_STEP.replace("discriminator(fake), 1 - targets", "discriminator(fake.detach()), 1 - targets")

ONE_LETTER = textwrap.dedent(
    """
    import torch


    def step(x, w):
        loss = (x @ w).pow(2).mean()
        loss.backward()
        with torch.no_grad():
            w -= 0.1 * w.grad
        return loss
    """
)
ONE_LETTER_FIXED = ONE_LETTER.replace("    return loss\n", "    return loss.detach()\n")

ATTENTION = textwrap.dedent(
    """
    import math
    import torch


    def attend(q, k, v):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        return torch.softmax(scores, dim=-1) @ v
    """
)
ATTENTION_FIXED = ATTENTION.replace("/ math.sqrt(q.size(-1))", "* (1.0 / math.sqrt(q.size(-1)))")


AUTOENCODER = textwrap.dedent(
    """
    import torch
    from torch import nn


    class AutoEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(64, 16), nn.ReLU())
            self.decoder = nn.Sequential(nn.Linear(16, 64), nn.Sigmoid())

        def forward(self, x):
            return self.decoder(self.encoder(x))


    def sample_images(model, z):
        images = model.decoder(z)
        return images
    """
)
AUTOENCODER_FIXED = AUTOENCODER.replace(
    "    images = model.decoder(z)\n", "    with torch.no_grad():\n        images = model.decoder(z)\n"
)

BIG_LAYERS = textwrap.dedent(
    """
    import torch
    from torch import nn


    class VideoNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv3d(64, 8, 3)
            self.head = nn.Linear(8, 2)

        def forward(self, clip):
            return self.head(self.conv(clip).mean(dim=(2, 3, 4)))


    class WideProbe(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(600_000, 2)

        def forward(self, x):
            return self.fc(x)


    class ImageNetHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 4, 7, stride=4), nn.AdaptiveAvgPool2d(1))
            self.fc = nn.Linear(4 * 56 * 56, 10)
            self.stem = nn.Conv2d(3, 4, 1)

        def forward(self, x):
            return self.fc(torch.flatten(self.stem(x)[:, :, ::4, ::4], 1))


    def train(video_net, loader, optimizer, criterion):
        for clip, label in loader:
            optimizer.zero_grad()
            criterion(video_net(clip), label).backward()
            optimizer.step()
    """
)




def _bind(source: str, qualname: str, **options) -> tuple[Binder, dict]:
    """Bind `qualname`'s parameters in-process, as a run child would."""
    torch.manual_seed(0)  # as the run child seeds before binding
    module = types.ModuleType("binding_case")
    exec(compile(source, "binding_case.py", "exec"), module.__dict__)  # noqa: S102 - the test's own code
    binder = Binder(namespace=module.__dict__, source=source, device=torch.device("cpu"), qualname=qualname, **options)
    fn = module.__dict__[qualname]
    args, kwargs = binder.bind_call(fn, [])
    names = [n for n in fn.__code__.co_varnames[: fn.__code__.co_argcount]]
    return binder, {**dict(zip(names, args)), **kwargs}


def _verify(verifier, tmp_path, original: str, rewritten: str, name: str):
    assert original != rewritten, "the case's rewrite did not apply"
    return verify_pair(original, rewritten, path=str(tmp_path / f"{name}.py"), verifier=verifier)


def _bound(verdict) -> dict:
    return verdict.units[0].evidence["original"]["bound"]


# -- shapes from the first layer ------------------------------------------------------------------
def test_cnn_batch_has_the_spatial_size_the_linear_after_flatten_needs(tmp_path, verifier):
    verdict = _verify(verifier, tmp_path, CNN, CNN_FIXED, "cnn")
    assert verdict.verdict == "accepted", verdict.reason
    assert "x [4, 3, 32, 32]" in _bound(verdict)["loader"]
    binder, values = _bind(CNN, "train_epoch")
    images, labels = values["loader"][0]
    assert images.shape == (4, 3, 32, 32) and labels.dtype == torch.long and int(labels.max()) < 10


def test_lstm_classifier_gets_long_token_ids_below_the_vocabulary(tmp_path, verifier):
    verdict = _verify(verifier, tmp_path, LSTM, LSTM_FIXED, "lstm")
    assert verdict.verdict == "accepted", verdict.reason
    _, values = _bind(LSTM, "train")
    for token_ids, labels in values["train_loader"]:
        assert token_ids.dtype == torch.long and token_ids.shape[1:] == (8,) and token_ids.shape[0] in (4, 2)
        assert 0 <= int(token_ids.min()) and int(token_ids.max()) < 1000
        assert labels.shape == token_ids.shape[:1] and int(labels.max()) < 5
    assert len(values["train_loader"]) <= 3


def test_forward_order_wins_over_definition_order(tmp_path, verifier):
    module = types.ModuleType("reordered")
    exec(compile(REORDERED, "reordered.py", "exec"), module.__dict__)  # noqa: S102
    model = module.BagClassifier()
    first = entry_layers(model, REORDERED)[0]
    assert isinstance(first, torch.nn.Embedding)  # although self.head is defined first
    assert model_plans(model, REORDERED)[0].integer
    verdict = _verify(verifier, tmp_path, REORDERED, REORDERED_FIXED, "reordered")
    assert verdict.verdict == "accepted", verdict.reason


def test_a_changed_forward_gets_the_input_its_model_accepts(tmp_path, verifier):
    needs_64 = CNN.replace("nn.Linear(32 * 8 * 8,", "nn.Linear(32 * 16 * 16,")
    fixed = needs_64.replace("x = self.pool(F.relu(self.conv1(x)))", "x = self.pool(torch.relu(self.conv1(x)))")
    verdict = _verify(verifier, tmp_path, needs_64, fixed, "cnn_forward")
    assert verdict.verdict == "accepted", verdict.reason
    assert _bound(verdict)["x"].startswith("tensor [4, 3, 64, 64]")


def test_rnn_input_respects_batch_first():
    source = textwrap.dedent(
        """
        import torch
        from torch import nn


        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = nn.GRU(12, 20)
                self.out = nn.Linear(20, 3)

            def forward(self, x):
                return self.out(self.gru(x)[0])


        def tag(model, x):
            return model(x)
        """
    )
    _, values = _bind(source, "tag")
    seq, batch, features = values["x"].shape
    assert features == 12 and batch <= MAX_BATCH and seq <= MAX_SEQUENCE and batch != seq
    _, values = _bind(source.replace("nn.GRU(12, 20)", "nn.GRU(12, 20, batch_first=True)"), "tag")
    batch, seq, features = values["x"].shape
    assert features == 12 and batch <= MAX_BATCH and seq <= MAX_SEQUENCE and batch != seq


def test_gray_images_get_mnist_size_and_a_generator_gets_its_latent():
    source = textwrap.dedent(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        nz, ngf = 16, 8


        class Net(nn.Module):
            def __init__(self):
                super(Net, self).__init__()
                self.conv1 = nn.Conv2d(1, 32, 3, 1)
                self.conv2 = nn.Conv2d(32, 64, 3, 1)
                self.fc1 = nn.Linear(9216, 128)
                self.fc2 = nn.Linear(128, 10)

            def forward(self, x):
                x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
                return F.log_softmax(self.fc2(F.relu(self.fc1(torch.flatten(x, 1)))), dim=1)


        class Generator(nn.Module):
            def __init__(self, ngpu):
                super(Generator, self).__init__()
                self.ngpu = ngpu
                self.main = nn.Sequential(
                    nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False),
                    nn.BatchNorm2d(ngf * 2),
                    nn.ReLU(True),
                    nn.ConvTranspose2d(ngf * 2, 3, 4, 2, 1, bias=False),
                    nn.Tanh(),
                )

            def forward(self, input):
                return self.main(input)


        def test(model, device, test_loader):
            correct = 0
            for data, target in test_loader:
                correct += model(data.to(device)).argmax(dim=1).eq(target).sum().item()
            return correct


        def generate(netG, noise):
            return netG(noise).mean()
        """
    )
    _, values = _bind(source, "test")
    data, target = values["test_loader"][0]
    assert data.shape == (4, 1, 28, 28) and int(target.max()) < 10
    _, values = _bind(source, "generate")
    assert type(values["netG"]).__name__ == "Generator"  # called like a module; "ngpu" got a value
    assert values["noise"].shape == (4, 16, 1, 1)


def test_searched_and_given_plans_build_identical_tensors():
    needs_64 = CNN.replace("nn.Linear(32 * 8 * 8,", "nn.Linear(32 * 16 * 16,")
    searched, values = _bind(needs_64, "train_epoch")
    index = searched.plan_record()["index"]
    assert index == 1 and values["loader"][0][0].shape == (4, 3, 64, 64)  # 32x32 was tried first
    given, again = _bind(needs_64, "train_epoch", plan=index)
    for (x1, y1), (x2, y2) in zip(values["loader"], again["loader"]):
        assert torch.equal(x1, x2) and torch.equal(y1, y2)
    first, second = values["loader"][0][0], values["loader"][1][0]
    assert not torch.equal(first, second)  # undoing the trials' draws must not repeat batches


# -- targets shaped by the loss -----------------------------------------------------------------------
def test_nll_step_gets_class_indices_although_the_file_also_uses_mse(tmp_path, verifier):
    _, values = _bind(CE_STEP, "train_step")
    labels = values["labels"]
    assert labels.dtype == torch.long and labels.shape == (values["x"].shape[0],)
    assert 0 <= int(labels.min()) and int(labels.max()) < 7
    verdict = _verify(verifier, tmp_path, CE_STEP, CE_STEP_FIXED, "ce_step")
    assert verdict.verdict == "accepted", verdict.reason
    assert "class indices" in _bound(verdict)["labels"]


def test_bce_step_gets_float_targets_in_the_unit_interval_shaped_like_the_output(tmp_path, verifier):
    _, values = _bind(BCE_STEP, "discriminator_step")
    targets = values["targets"]
    assert targets.is_floating_point() and targets.shape == (values["real"].shape[0], 1)
    assert 0.0 <= float(targets.min()) and float(targets.max()) <= 1.0
    verdict = _verify(verifier, tmp_path, BCE_STEP, BCE_STEP_FIXED, "bce_step")
    assert verdict.verdict == "accepted", verdict.reason


def test_dict_output_targets_come_from_the_logits():
    source = textwrap.dedent(
        """
        import torch
        from torch import nn
        import torch.nn.functional as F


        class Heads(nn.Module):
            def __init__(self):
                super().__init__()
                self.trunk = nn.Linear(6, 9)

            def forward(self, x):
                h = self.trunk(x)
                return {"features": h, "logits": h[:, :4]}


        def step(model, x, target):
            return F.cross_entropy(model(x)["logits"], target)
        """
    )
    _, values = _bind(source, "step")
    assert values["target"].dtype == torch.long and int(values["target"].max()) < 4


# -- roles from the body's evidence ---------------------------------------------------------------
def test_one_letter_tensors_are_bound_by_their_use(tmp_path, verifier):
    verdict = _verify(verifier, tmp_path, ONE_LETTER, ONE_LETTER_FIXED, "sgd_step")
    assert verdict.verdict == "accepted", verdict.reason
    bound = _bound(verdict)
    assert bound["x"].startswith("tensor [4, 8]") and bound["w"].startswith("tensor [8, 8] requires_grad")
    assert "@" in bound["w"]  # the verdict says why it is a tensor


def test_a_key_named_k_is_a_tensor_not_a_count(tmp_path, verifier):
    verdict = _verify(verifier, tmp_path, ATTENTION, ATTENTION_FIXED, "attend")
    assert verdict.verdict == "accepted", verdict.reason
    assert "k.transpose" in _bound(verdict)["k"]


def test_evidence_beats_names_and_names_break_ties():
    source = textwrap.dedent(
        """
        import torch


        def smooth(p, n, steps):
            for _ in range(steps):
                p = torch.sigmoid(p) * n
            return p
        """
    )
    uses = read_unit(source, "smooth", lambda callee: False).uses
    assert uses["p"].reads_as_tensor  # passed to torch.sigmoid, although "p" reads as a float
    assert not uses["n"].reads_as_tensor and not uses["steps"].reads_as_tensor
    _, values = _bind(source, "smooth")
    assert isinstance(values["p"], torch.Tensor)
    assert values["n"] == 2 and values["steps"] == 2  # no evidence: the names decide


def test_only_calls_of_real_layers_make_tensors_in_a_method():
    source = textwrap.dedent(
        """
        import torch
        from torch import nn


        class Trainer:
            def __init__(self):
                self.model = nn.Linear(4, 2)
                self.history = []

            def record(self, step, value):
                self.history.append((step, value))

            def train_step(self, batch, step):
                loss = self.model(batch).pow(2).mean()
                loss.backward()
                self.record(step, loss.detach())
                return loss
        """
    )
    module = types.ModuleType("trainer_case")
    exec(compile(source, "trainer_case.py", "exec"), module.__dict__)  # noqa: S102
    binder = Binder(namespace=module.__dict__, source=source, device=torch.device("cpu"), qualname="Trainer.train_step")
    binder.values["self"] = module.Trainer()
    (batch, step), _ = binder.bind_call(module.Trainer.train_step, [], skip_first=True)
    assert isinstance(batch, torch.Tensor) and batch.shape == (4, 4)  # fed to self.model, a Linear(4, 2)
    assert step == 2  # passed to self.record, a method: the name decides


def test_modules_batches_and_helpers_are_read_from_the_body():
    source = textwrap.dedent(
        """
        import torch
        from torch import nn


        def barrier_loss(relu, x_samples, x_goal, margin=0.1):
            v = relu(x_samples) - relu(x_goal)
            return torch.relu(v + margin).mean()


        def fit(relu, x_samples, x_goal, max_iterations=3):
            optimizer = torch.optim.SGD(relu.parameters(), lr=0.1)
            losses = []
            for _ in range(max_iterations):
                optimizer.zero_grad()
                loss = barrier_loss(relu, x_samples, x_goal)
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            return losses


        def training_step(model, batch):
            inputs, labels = batch
            return nn.functional.cross_entropy(model(inputs), labels)
        """
    )
    _, values = _bind(source, "fit")
    assert isinstance(values["relu"], torch.nn.Module)  # relu.parameters(): a module, whatever its name
    # "x_samples" could be a loader by name; barrier_loss feeds it to the module
    assert isinstance(values["x_samples"], torch.Tensor) and isinstance(values["x_goal"], torch.Tensor)
    _, values = _bind(source, "training_step")
    inputs, labels = values["batch"]  # unpacked in the body: one (x, y) batch, not a tensor
    assert inputs.is_floating_point() and labels.dtype == torch.long


def test_a_forward_with_more_inputs_and_a_position_embedding():
    source = textwrap.dedent(
        """
        import torch
        from torch import nn


        class ResnetBlock(nn.Module):
            def __init__(self, dim, dim_out, time_emb_dim=6):
                super().__init__()
                self.mlp = nn.Sequential(nn.SiLU(), nn.Linear(time_emb_dim, dim_out))
                self.block = nn.Conv2d(dim, dim_out, 3, padding=1)

            def forward(self, x, time_emb):
                return self.block(x) + self.mlp(time_emb)[:, :, None, None]


        class PatchDecoder(nn.Module):
            def __init__(self, num_tokens=5, dim=8):
                super().__init__()
                self.pos_embedding = nn.Parameter(torch.zeros(1, num_tokens, dim))
                self.norm = nn.LayerNorm(dim)

            def forward(self, tokens):
                return self.norm(tokens + self.pos_embedding)


        def denoise(resnet_block, x):
            return resnet_block(x, torch.zeros(x.shape[0], 6))


        def decode(patch_decoder, tokens):
            return patch_decoder(tokens)
        """
    )
    _, values = _bind(source, "denoise")  # the model's probe needs its time_emb too
    assert values["x"].shape[:2] == (4, 8) and values["x"].dim() == 4
    _, values = _bind(source, "decode")
    assert values["tokens"].shape == (4, 5, 8)  # the sequence the position embedding fixes


def test_a_sigmoid_before_the_loss_asks_for_targets_in_the_unit_interval():
    source = textwrap.dedent(
        """
        import torch
        from torch import nn


        class Heatmap(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 2, 3, padding=1)

            def forward(self, x):
                return self.conv(x)


        def train(model, loader, optimizer, criterion):
            for images, heatmaps in loader:
                loss = criterion(torch.sigmoid(model(images)), heatmaps.float())
                loss.backward()
                optimizer.step()
        """
    )
    _, values = _bind(source, "train")
    images, heatmaps = values["loader"][0]
    assert heatmaps.is_floating_point() and heatmaps.shape == (4, 2, 32, 32)
    assert 0.0 <= float(heatmaps.min()) and float(heatmaps.max()) <= 1.0


def test_a_name_with_no_evidence_is_reported_with_why(tmp_path, verifier):
    source = "import torch\n\n\ndef blend(x, c):\n    return torch.relu(x) * c\n"
    with pytest.raises(Unbindable) as caught:
        _bind(source, "blend")
    assert caught.value.name == "c" and "no tensor method" in caught.value.why
    verdict = _verify(verifier, tmp_path, source, source.replace("* c", "* c + 0"), "blend")
    assert verdict.verdict == "unverified" and "'c'" in verdict.reason and "[tool.autograd-fix.verify]" in verdict.reason


def test_factories_still_win_over_evidence(tmp_path, verifier):
    # a factory module is imported inside the run, which as root is an unprivileged user:
    # the project's folder must be readable to others, as projects are (pytest makes 0700)
    tmp_path.chmod(0o755)
    (tmp_path / "pyproject.toml").write_text('[tool.autograd-fix.verify]\nw = "agf_binding_factories:make_w"\n')
    (tmp_path / "agf_binding_factories.py").write_text(
        "import torch\n\n\ndef make_w():\n    return torch.eye(8, requires_grad=True)\n"
    )
    verdict = verify_pair(ONE_LETTER, ONE_LETTER_FIXED, path=str(tmp_path / "sgd.py"), verifier=verifier)
    assert verdict.verdict == "accepted", verdict.reason
    assert _bound(verdict)["w"] == "factory agf_binding_factories:make_w"


# -- the candidate search -------------------------------------------------------------------------
def test_a_tensor_fed_to_part_of_a_model_is_shaped_for_that_part(tmp_path, verifier):
    verdict = _verify(verifier, tmp_path, AUTOENCODER, AUTOENCODER_FIXED, "autoencoder")
    assert verdict.verdict == "accepted", verdict.reason
    assert _bound(verdict)["z"].startswith("tensor [4, 16]")  # the decoder's input, not the encoder's


CAUSAL_SCORES = textwrap.dedent(
    """
    import torch


    def causal_attention(q, k, v):
        T = q.size(1)
        scores = q @ k.transpose(1, 2) / q.size(-1) ** 0.5
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        return weights @ v
    """
)


def test_unit_shape_error_moves_both_sides_to_the_next_candidate(tmp_path, verifier):
    fixed = CAUSAL_SCORES.replace("/ q.size(-1) ** 0.5", "* q.size(-1) ** -0.5")
    verdict = _verify(verifier, tmp_path, CAUSAL_SCORES, fixed, "causal")
    assert verdict.verdict == "accepted", verdict.reason  # 2-D tensors raise; sequences [B, T, F] run
    evidence = verdict.units[0].evidence
    assert evidence["original"]["bound"] == evidence["rewritten"]["bound"]
    assert evidence["original"]["bound"]["q"].startswith("tensor [4, 8, 8]")


def test_model_rejecting_every_candidate_says_what_was_tried():
    source = textwrap.dedent(
        """
        import torch
        from torch import nn


        class Picky(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(10, 2)

            def forward(self, x):
                return self.fc(x.view(-1, 999))


        def run(model, x):
            return model(x)
        """
    )
    with pytest.raises(Unbindable) as caught:
        _bind(source, "run")
    assert caught.value.name == "inputs" and "rejected every synthesized batch" in caught.value.why
    assert "[4, 10]" in caught.value.why


def test_a_model_too_slow_for_its_slice_stops_the_search(monkeypatch):
    from autograd_fix.verification import binding

    monkeypatch.setattr(binding, "PLAN_SLICE_S", 0.2)
    source = textwrap.dedent(
        """
        import torch
        from torch import nn


        class Spinner(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)

            def forward(self, x):
                while True:
                    x = x + 0
        """
    )
    source += "\n\ndef run(model, x):\n    return model(x)\n"
    with pytest.raises(Unbindable) as caught:
        _bind(source, "run")
    assert "over its 0.2 s slice" in caught.value.why and ";" not in caught.value.why  # one try, not six


def _outcome(plan: int, count: int, error: str | None) -> Outcome:
    exception = ExceptionRecord(type="RuntimeError", message=error, phase="run") if error else None
    return Outcome("ok", "finished", 0.1, "", 0, record=RunRecord(input_plan={"index": plan, "count": count}, exception=exception))


def test_search_is_bounded_and_gives_the_rewritten_side_the_winning_plan():
    calls = []

    def run_sides(request, unit, sources):
        plan = unit.get("input_plan") or 0
        calls.append((plan, tuple(sources), request.timeout))
        fits = plan == 3
        return [_outcome(plan, 6, None if fits else "mat1 and mat2 shapes cannot be multiplied (4x8 and 16x2)") for _ in sources]

    original, rewritten = run_searching_inputs(VerifyRequest(timeout=20.0), {}, ("ORIG", "NEW"), run_sides)
    assert original.record.input_plan["index"] == 3 and rewritten.record.input_plan["index"] == 3
    trials = [call for call in calls[1:] if call[1] == ("ORIG",)]
    assert [plan for plan, _, _ in trials] == [1, 2, 3]  # in order, stopping at the first clean one
    assert all(timeout <= 5.0 for _, _, timeout in trials)  # each under a short slice
    assert calls[-1][:2] == (3, ("NEW",))


def test_search_never_runs_more_than_the_cap_and_ignores_other_errors():
    calls = []

    def always_mismatch(request, unit, sources):
        calls.append(unit.get("input_plan"))
        return [_outcome(unit.get("input_plan") or 0, 50, "size mismatch, m1: [4 x 8], m2: [16 x 2]") for _ in sources]

    original, rewritten = run_searching_inputs(VerifyRequest(timeout=20.0), {}, ("ORIG", "NEW"), always_mismatch)
    assert len(calls) - 1 <= MAX_TRIALS
    # no candidate fits: the inputs' fault, so unverified (unbound), never "the error persists"
    assert original.record.unbound.name == rewritten.record.unbound.name == "inputs"
    assert "size mismatch" in original.record.unbound.why
    calls.clear()

    def autograd_error(request, unit, sources):
        calls.append(unit.get("input_plan"))
        message = "one of the variables needed for gradient computation has been modified by an inplace operation"
        return [_outcome(0, 6, message) for _ in sources]

    original, _ = run_searching_inputs(VerifyRequest(timeout=20.0), {}, ("ORIG", "NEW"), autograd_error)
    assert calls == [None]  # not a shape error: the code's own verdict, no search
    assert original.record.unbound is None


# -- caps ---------------------------------------------------------------------------------------------
def _spatial_dims(tensor: torch.Tensor) -> list[int]:
    return list(tensor.shape[2:]) if tensor.dim() >= 4 else []


@pytest.mark.parametrize("model_class", ["VideoNet", "WideProbe", "ImageNetHead"])
def test_no_synthesized_tensor_exceeds_the_caps(model_class):
    source = BIG_LAYERS.replace("video_net(clip)", "model(clip)").replace("def train(video_net,", "def train(model,")
    binder = Binder(namespace={}, source=source, device=torch.device("cpu"), qualname="train")
    module = types.ModuleType("big_layers")
    exec(compile(source, "big_layers.py", "exec"), module.__dict__)  # noqa: S102
    binder.namespace = module.__dict__
    binder.values["model"] = binder._model = getattr(module, model_class)()
    loader = binder.value("loader")
    assert 2 <= len(loader) <= 3
    for x, y in loader:
        for tensor in (x, y):
            assert tensor.numel() <= MAX_ELEMENTS
            assert tensor.shape[0] <= MAX_BATCH
        if model_class != "ImageNetHead":  # the only one that needs a larger image
            assert all(size <= MAX_SPATIAL for size in _spatial_dims(x))
    if model_class == "ImageNetHead":
        assert _spatial_dims(loader[0][0]) == [224, 224]  # needed, so allowed, still under the element cap
        assert loader[0][0].shape[0] == 2  # and run two at a time
    assert math.prod(loader[0][0].shape) <= MAX_ELEMENTS


def test_a_synthesized_loader_ends_with_a_partial_batch_so_batch_weighting_shows(verifier) -> None:
    """Modelled on an ImageNet-style `validate` that averages per-batch losses: weighting
    by batch size is invisible when every batch has the same size, so the last
    synthesized batch is smaller, as a DataLoader without `drop_last` gives."""
    original = textwrap.dedent(
        """
        import torch
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(10, 3)

            def forward(self, x):
                return self.fc(x)


        def validate(model, val_loader, criterion):
            model.eval()
            total, count = 0.0, 0
            for images, target in val_loader:
                loss = criterion(model(images), target)
                total += loss.item() * images.size(0)
                count += images.size(0)
            return total / count
        """
    )
    wrong = original.replace("total += loss.item() * images.size(0)", "total += loss.item()").replace(
        "count += images.size(0)", "count += 1"
    )
    verdict = verify_pair(original, wrong, verifier=verifier, checks=("outputs_equal",), timeout=30)
    assert verdict.verdict == "rejected", verdict.reason
    assert "the last of 2" in str(verdict.units[0].evidence["original"].get("bound"))


def test_a_body_that_reads_a_third_dimension_gets_a_three_dimensional_input():
    """da-rnn's decoder reads `input_encoded.size(2)` and multiplies batches of matrices
    with it: a (batch, features) input can only raise "Dimension out of range"."""
    source = textwrap.dedent(
        """
        import torch

        def attend(input_encoded, hidden, y_history, t):
            context = input_encoded.new_zeros(input_encoded.size(0), input_encoded.size(2))
            scores = torch.bmm(input_encoded, hidden.unsqueeze(2))
            return context, scores, y_history.shape[-1], y_history[:, t]
        """
    )
    uses = read_unit(source, "attend", lambda func: False).uses
    assert uses["input_encoded"].min_rank == 3
    assert uses["y_history"].min_rank == 2  # `y_history[:, t]` indexes a second axis
    assert uses["y_history"].stepped_axes == {1} and not uses["input_encoded"].stepped_axes
    assert uses["hidden"].min_rank == 0  # `hidden.unsqueeze(2)` is passed, not `hidden`
    assert uses["t"].min_rank == 0


def test_with_rank_adds_sequence_axes_after_the_batch():
    from autograd_fix.verification.shapes import SEQUENCE, with_rank

    grown = with_rank(torch.randn(4, 6), 3)
    assert tuple(grown.shape) == (4, SEQUENCE, 6) and grown.dtype == torch.float32


def test_a_module_seen_by_the_names_is_never_mistaken_for_a_later_one():
    # ids are reused once a module dies: a dropped probe model must not make the next
    # module at the same address pass for one already named
    import gc

    from torch import nn

    from autograd_fix.verification.probes import ModuleNames

    names = ModuleNames()
    for index in range(20):
        module = nn.Linear(2, 2)
        assert names.first_call(module) == f"Linear#{index}"
        del module
        gc.collect()
