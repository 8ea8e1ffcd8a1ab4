"""AGF001 on the classes `benchmarks/recall_real` measured on code nobody here wrote (issue 18):
each test is a reduced, real-looking form of one class of misses or false findings."""

from __future__ import annotations

import textwrap

import libcst as cst

from autograd_fix.codemods.engine import FixOptions, check_source
from autograd_fix.codemods.imports import ImportIndex
from autograd_fix.codemods.model import Applicability
from autograd_fix.codemods.registry import rule_by_code
from autograd_fix.codemods.semantic.callgraph import CallGraph

AGF001 = rule_by_code("AGF001")


def _check(source: str, path: str = "train.py"):
    return check_source(textwrap.dedent(source).lstrip(), [AGF001], path=path, options=FixOptions(unsafe_fixes=True))


def _graph(source: str) -> CallGraph:
    module = cst.parse_module(textwrap.dedent(source).lstrip())
    return CallGraph.build(module, ImportIndex.from_module(module))


# -- class 1: a main() that runs rollout forwards and calls a same-file training method --

ACTOR_CRITIC = """
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.data = []
        self.fc1 = nn.Linear(4, 16)
        self.fc_pi = nn.Linear(16, 2)
        self.optimizer = optim.Adam(self.parameters(), lr=0.01)

    def pi(self, x):
        return F.softmax(self.fc_pi(F.relu(self.fc1(x))), dim=0)

    def put_data(self, item):
        self.data.append(item)

    def train_net(self):
        s = torch.stack([d[0] for d in self.data])
        loss = -torch.log(self.pi(s)).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.data = []


def main():
    model = ActorCritic()
    for n_epi in range(10):
        s = torch.randn(4)
        for t in range(5):
            prob = model.pi(s)
            a = Categorical(prob).sample().item()
            model.put_data((s, a))
        model.train_net()


if __name__ == "__main__":
    main()
"""


def test_a_receiver_built_from_a_same_file_class_resolves_to_its_methods() -> None:
    graph = _graph(ACTOR_CRITIC)
    [main] = [f for f in graph.functions.values() if f.node.name.value == "main"]
    [train_net] = graph.resolve("model.train_net", None, main.node)
    assert train_net.node.name.value == "train_net" and train_net.class_name == "ActorCritic"
    assert main.uses_grad  # through model.train_net() -> loss.backward()


def test_main_that_calls_a_same_file_training_method_is_never_decorated() -> None:
    result = _check(ACTOR_CRITIC)
    assert not any("`main`" in f.message for f in result.findings)
    assert result.fixed is None or "@torch.no_grad()\ndef main" not in result.fixed


def test_a_receiver_bound_to_two_classes_is_not_typed() -> None:
    source = ACTOR_CRITIC.replace(
        "def main():\n    model = ActorCritic()",
        "class Other(nn.Module):\n    def train_net(self):\n        pass\n\n\ndef main():\n"
        "    model = ActorCritic()\n    if len(__name__) > 3:\n        model = Other()",
    )
    graph = _graph(source)
    [main] = [f for f in graph.functions.values() if f.node.name.value == "main"]
    assert graph.resolve("model.train_net", None, main.node) == []


def test_receivers_are_typed_scope_by_scope() -> None:
    # `pi` is a parameter of calc_target and a PolicyNet in main (minimalRL's sac.py)
    source = ACTOR_CRITIC.replace("model", "pi") + textwrap.dedent(
        """

        def calc_target(pi, s):
            return pi.pi(s).max()
        """
    )
    graph = _graph(source)
    by_name = {f.node.name.value: f for f in graph.functions.values()}
    assert [f.node.name.value for f in graph.resolve("pi.train_net", None, by_name["main"].node)] == ["train_net"]
    assert graph.resolve("pi.pi", None, by_name["calc_target"].node) == []
    assert by_name["main"].uses_grad


def test_a_tuple_of_constructors_types_each_name() -> None:
    source = ACTOR_CRITIC.replace("model = ActorCritic()", "model, target = ActorCritic(), ActorCritic()")
    graph = _graph(source)
    [main] = [f for f in graph.functions.values() if f.node.name.value == "main"]
    assert [f.class_name for f in graph.resolve("target.train_net", None, main.node)] == ["ActorCritic"]


def test_a_method_inherited_from_a_same_file_base_resolves() -> None:
    source = ACTOR_CRITIC.replace("model = ActorCritic()", "model = Agent()") + textwrap.dedent(
        """

        class Agent(ActorCritic):
            def act(self, s):
                return self.pi(s).argmax().item()
        """
    )
    graph = _graph(source)
    [main] = [f for f in graph.functions.values() if f.node.name.value == "main"]
    [train_net] = graph.resolve("model.train_net", None, main.node)
    assert train_net.class_name == "ActorCritic"


DQN = """
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class Qnet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 64)
        self.fc2 = nn.Linear(64, 2)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))

    def sample_action(self, obs, epsilon):
        out = self.forward(obs)
        if random.random() < epsilon:
            return random.randint(0, 1)
        return out.argmax().item()


def train(q, memory, optimizer):
    s, a = torch.stack([m[0] for m in memory]), torch.tensor([[m[1]] for m in memory])
    loss = -q(s).gather(1, a).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def main():
    q = Qnet()
    optimizer = optim.Adam(q.parameters(), lr=1e-3)
    memory = []
    for n_epi in range(10):
        s = torch.randn(4)
        a = q.sample_action(s, 0.1)
        memory.append((s, a))
        train(q, memory, optimizer)
"""


def test_a_method_returning_only_python_values_is_decorated_whoever_calls_it() -> None:
    # main's replay buffer takes the action into training: the action is an int, so the
    # forward's graph dies inside sample_action whatever main does with it
    [finding] = _check(DQN).findings
    assert "`sample_action`" in finding.message
    assert "    @torch.no_grad()\n    def sample_action" in _check(DQN).fixed


#: ActorCritic's main, with the class imported from another file
IMPORTED_AGENT = """
import torch
from torch.distributions import Categorical

from agents import ActorCritic


""" + ACTOR_CRITIC[ACTOR_CRITIC.index("def main():") : ACTOR_CRITIC.index("\n\nif __name__")]


def test_a_call_this_file_cannot_resolve_that_may_train_makes_the_fix_unsafe() -> None:
    # `model.train_net()` of a class from another file may backpropagate: a decoration of
    # main is at most a proposal that verification decides, never a safe fix
    result = _check(IMPORTED_AGENT)
    decorations = [f for f in result.findings if f.fix is not None and "decorate" in f.fix.description]
    assert decorations and all(f.fix.applicability is Applicability.UNSAFE for f in decorations)


def test_a_function_that_only_calls_module_api_on_an_unseen_model_stays_safe() -> None:
    # nn.Module's own API (`load_state_dict`, `to`, `eval`) trains nothing, and the call of
    # the model itself is the forward: nothing unknown that could train is left
    source = """
    import torch
    from models import Net


    def show_predictions(images):
        model = Net()
        model.load_state_dict(torch.load("net.pt"))
        model.to("cpu")
        model.eval()
        print(model(images).argmax(1).tolist())
    """
    [finding] = _check(source).findings
    assert finding.fix is not None and finding.fix.applicability is Applicability.SAFE


# -- class 2: helpers only Lightning's grad-off hooks call --------------------------------

LIT_RESNET = """
import torch
import torch.nn.functional as F
import pytorch_lightning as pl
from torchmetrics.functional import accuracy
from torchvision.models import resnet18


class LitResnet(pl.LightningModule):
    def __init__(self, lr=0.05):
        super().__init__()
        self.model = resnet18(num_classes=10)
        self.lr = lr

    def forward(self, x):
        return F.log_softmax(self.model(x), dim=1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.nll_loss(self(x), y)
        self.log("train_loss", loss)
        return loss

    def evaluate(self, batch, stage=None):
        x, y = batch
        logits = self(x)
        loss = F.nll_loss(logits, y)
        preds = torch.argmax(logits, dim=1)
        acc = accuracy(preds, y, task="multiclass", num_classes=10)
        if stage:
            self.log(f"{stage}_loss", loss.item(), prog_bar=True)
            self.log(f"{stage}_acc", acc.item(), prog_bar=True)

    def validation_step(self, batch, batch_idx):
        self.evaluate(batch, "val")

    def test_step(self, batch, batch_idx):
        self.evaluate(batch, "test")

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)


class SWAResnet(LitResnet):
    def __init__(self, trained_model, lr=0.01):
        super().__init__()
        self.model = trained_model
        self.swa_model = torch.optim.swa_utils.AveragedModel(self.model)

    def forward(self, x):
        return F.log_softmax(self.swa_model(x), dim=1)

    def validation_step(self, batch, batch_idx, stage=None):
        x, y = batch
        logits = F.log_softmax(self.model(x), dim=1)
        preds = torch.argmax(logits, dim=1)
        self.log("val_acc", accuracy(preds, y, task="multiclass", num_classes=10).item())
"""


def test_a_helper_only_lightning_evaluation_hooks_call_is_silent() -> None:
    assert not any("`evaluate`" in f.message for f in _check(LIT_RESNET).findings)


def test_a_lightning_module_subclassed_through_a_same_file_base_keeps_its_hooks_grad_off() -> None:
    assert _check(LIT_RESNET).findings == []


VAE_EXPERIMENT = """
import torch
import torchvision.utils as vutils
import pytorch_lightning as pl


class VAEXperiment(pl.LightningModule):
    def __init__(self, vae_model, params):
        super().__init__()
        self.model = vae_model
        self.params = params

    def forward(self, input, **kwargs):
        return self.model(input, **kwargs)

    def training_step(self, batch, batch_idx):
        real_img, labels = batch
        results = self.forward(real_img, labels=labels)
        return self.model.loss_function(*results, M_N=self.params["kld_weight"])["loss"]

    def on_validation_end(self) -> None:
        self.sample_images()

    def sample_images(self):
        test_input, test_label = next(iter(self.trainer.datamodule.test_dataloader()))
        recons = self.model.generate(test_input, labels=test_label)
        vutils.save_image(recons.data, "recons.png", normalize=True, nrow=12)
        samples = self.model.sample(144, self.curr_device, labels=test_label)
        vutils.save_image(samples.cpu().data, "samples.png", normalize=True, nrow=12)
"""


def test_a_sampling_helper_called_from_on_validation_end_is_silent() -> None:
    assert _check(VAE_EXPERIMENT).findings == []


def test_the_same_helper_called_from_a_training_hook_is_still_examined() -> None:
    source = VAE_EXPERIMENT.replace("def on_validation_end(self) -> None:", "def on_train_epoch_end(self) -> None:")
    assert any("`sample_images`" in f.message for f in _check(source).findings)
