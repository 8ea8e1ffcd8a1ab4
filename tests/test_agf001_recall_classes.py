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


# -- class 3: forwards inside training code whose graph dies (rollouts, critics, targets) --


def _wrapped_lines(result) -> list[str]:
    """The statements each unsafe `with torch.no_grad():` wrap of a training scope covers."""
    fixed = (result.fixed or "").splitlines()
    found = []
    for number, line in enumerate(fixed):
        if line.strip() == "with torch.no_grad():":
            indent = len(line) - len(line.lstrip())
            body = []
            for inner in fixed[number + 1 :]:
                if inner.strip() and len(inner) - len(inner.lstrip()) <= indent:
                    break
                body.append(inner.strip())
            found.append("; ".join(b for b in body if b))
    return found


def test_rollout_forward_and_critic_targets_cut_before_the_loss_are_wrapped() -> None:
    source = ACTOR_CRITIC.replace(
        """    def train_net(self):
        s = torch.stack([d[0] for d in self.data])
        loss = -torch.log(self.pi(s)).mean()""",
        """    def v(self, x):
        return self.fc_v(F.relu(self.fc1(x)))

    def train_net(self):
        s = torch.stack([d[0] for d in self.data])
        a = torch.tensor([[d[1]] for d in self.data])
        r = torch.tensor([[d[2]] for d in self.data])
        s_prime = torch.stack([d[3] for d in self.data])
        td_target = r + 0.98 * self.v(s_prime)
        delta = td_target - self.v(s)
        pi_a = self.pi(s).gather(1, a)
        loss = -torch.log(pi_a) * delta.detach() + F.smooth_l1_loss(self.v(s), td_target.detach())""",
    ).replace("self.fc_pi = nn.Linear(16, 2)", "self.fc_pi = nn.Linear(16, 2)\n        self.fc_v = nn.Linear(16, 1)").replace(
        "model.put_data((s, a))", "model.put_data((s, a, 1.0, torch.randn(4)))"
    ).replace("return F.softmax(self.fc_pi(F.relu(self.fc1(x))), dim=0)", "return F.softmax(self.fc_pi(F.relu(self.fc1(x))), dim=-1)")
    result = _check(source)
    assert all(f.fix is not None and f.fix.applicability is Applicability.UNSAFE for f in result.findings)
    assert sorted(_wrapped_lines(result)) == [
        "prob = model.pi(s)",
        "td_target = r + 0.98 * self.v(s_prime); delta = td_target - self.v(s)",
    ]


TD_LOSS = """
import torch
import torch.nn as nn
from torch.autograd import Variable

model = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2))
optimizer = torch.optim.Adam(model.parameters())
gamma = 0.99


def compute_td_loss(state, action, reward, next_state, done):
    q_values = model(state)
    next_q_values = model(next_state)

    q_value = q_values.gather(1, action.unsqueeze(1)).squeeze(1)
    next_q_value = next_q_values.max(1)[0]
    expected_q_value = reward + gamma * next_q_value * (1 - done)

    loss = (q_value - Variable(expected_q_value.data)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss
"""


def test_a_target_forward_cut_by_data_before_the_loss_is_wrapped() -> None:
    result = _check(TD_LOSS)
    assert _wrapped_lines(result) == ["next_q_values = model(next_state)"]


def test_the_same_target_without_a_cut_reaches_the_backward() -> None:
    assert _check(TD_LOSS.replace("Variable(expected_q_value.data)", "expected_q_value")).findings == []


def test_ordinary_training_code_has_no_dead_forward() -> None:
    source = """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    def train_gan(G, D, loader, opt_g, opt_d, z_dim=16):
        for real, _ in loader:
            z = torch.randn(real.size(0), z_dim)
            fake = G(z)
            d_loss = F.softplus(D(fake.detach())).mean() + F.softplus(-D(real)).mean()
            opt_d.zero_grad()
            d_loss.backward()
            opt_d.step()
            g_loss = F.softplus(-D(fake)).mean()
            opt_g.zero_grad()
            g_loss.backward()
            opt_g.step()


    def reinforce(pi, env, optimizer):
        log_probs = []
        s = env.reset()
        for t in range(100):
            prob = pi(torch.from_numpy(s).float())
            a = torch.distributions.Categorical(prob).sample()
            log_probs.append(torch.log(prob[a]))
            s, r, done, _ = env.step(a.item())
        loss = -torch.stack(log_probs).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


    def fit(model, loader, optimizer, criterion):
        hidden = model.init_hidden(32)
        for x, y in loader:
            out, hidden = model(x, hidden)
            loss = criterion(out, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
    assert _check(source).findings == []


def test_a_script_rollout_at_module_level_is_wrapped() -> None:
    source = ACTOR_CRITIC[: ACTOR_CRITIC.index("def main():")] + textwrap.dedent(
        """
        if __name__ == "__main__":
            model = ActorCritic()
            s = torch.randn(4)
            for step in range(100):
                prob = model.pi(s)
                a = Categorical(prob).sample().item()
                model.put_data((s, a))
                s = torch.randn(4)
                if step % 10 == 9:
                    model.train_net()
        """
    )
    result = _check(source)
    assert _wrapped_lines(result) == ["prob = model.pi(s)"]


def test_unwrapping_a_prepared_model_after_training_is_no_forward() -> None:
    source = """
    import torch
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM

    accelerator = Accelerator()
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    model, optimizer = accelerator.prepare(model, optimizer)
    for batch in range(3):
        optimizer.zero_grad()
        loss = model(batch).loss
        accelerator.backward(loss)
        optimizer.step()
        print(f"loss {loss.item():.3f}")
    unwrapped_model = accelerator.unwrap_model(model)
    unwrapped_model.save_pretrained("out")
    """
    assert _check(source).findings == []


DDPG = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc_s = nn.Linear(3, 32)
        self.fc_a = nn.Linear(1, 32)
        self.fc_q = nn.Linear(64, 1)

    def forward(self, x, a):
        return self.fc_q(torch.cat([F.relu(self.fc_s(x)), F.relu(self.fc_a(a))], dim=1))


class MuNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 1)

    def forward(self, x):
        return torch.tanh(self.fc(x)) * 2


def train(mu, mu_target, q, q_target, batch, q_optimizer, mu_optimizer, gamma=0.99):
    s, a, r, s_prime, done_mask = batch
    target = r + gamma * q_target(s_prime, mu_target(s_prime)) * done_mask
    q_loss = F.smooth_l1_loss(q(s, a), target.detach())
    q_optimizer.zero_grad()
    q_loss.backward()
    q_optimizer.step()

    mu_loss = -q(s, mu(s)).mean()
    mu_optimizer.zero_grad()
    mu_loss.backward()
    mu_optimizer.step()
    print(f"q {q_loss.item():.3f} mu {mu_loss.item():.3f}")


def main():
    q, q_target = QNet(), QNet()
    mu, mu_target = MuNet(), MuNet()
    q_optimizer = torch.optim.Adam(q.parameters(), lr=1e-3)
    mu_optimizer = torch.optim.Adam(mu.parameters(), lr=1e-4)
    for step in range(10):
        batch = (torch.randn(8, 3), torch.randn(8, 1), torch.randn(8, 1), torch.randn(8, 3), torch.ones(8, 1))
        train(mu, mu_target, q, q_target, batch, q_optimizer, mu_optimizer)
"""


def test_a_target_network_passed_in_by_every_caller_is_a_model_by_evidence() -> None:
    # `q_target` says nothing by its name; main binds it to a same-file module class
    assert _wrapped_lines(_check(DDPG)) == ["target = r + gamma * q_target(s_prime, mu_target(s_prime)) * done_mask"]


# -- class 4: predict_* helpers without model.eval() ---------------------------------------

PREDICT = """
import torch
import torch.nn as nn

model = nn.EmbeddingBag(100, 2)
optimizer = torch.optim.Adam(model.parameters())
for ids, label in [(torch.randint(0, 100, (1, 5)), torch.tensor([1]))] * 3:
    loss = nn.functional.cross_entropy(model(ids), label)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def predict_sentiment(ids, model, device):
    tensor = torch.LongTensor(ids).unsqueeze(dim=0).to(device)
    prediction = model(tensor).squeeze(dim=0)
    probability = torch.softmax(prediction, dim=-1)
    predicted_class = prediction.argmax(dim=-1).item()
    predicted_probability = probability[predicted_class].item()
    return predicted_class, predicted_probability


predict_sentiment([1, 2, 3], model, "cpu")
"""


def test_a_predict_function_returning_only_item_values_is_decorated_in_a_file_that_trains() -> None:
    result = _check(PREDICT)
    assert [f.message.split("`")[1] for f in result.findings] == ["predict_sentiment"]
    assert "@torch.no_grad()\ndef predict_sentiment" in result.fixed


def test_a_predict_function_returning_the_model_output_stays_silent_where_the_file_trains() -> None:
    source = PREDICT.replace("return predicted_class, predicted_probability", "return prediction, predicted_class")
    assert _check(source).findings == []


def test_a_helper_named_like_a_model_is_no_forward_in_training_code() -> None:
    # transformers' Trainer: `_is_peft_model(self.model)` in the training loop's set-up
    source = """
    import torch
    from .trainer_utils import _is_peft_model


    def train(model, loader, optimizer):
        strict = not _is_peft_model(model)
        print(f"strict loading: {strict}")
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(f"loss {loss.item():.3f}")
    """
    assert _check(source).findings == []


def test_a_sampling_forward_of_a_module_attribute_after_training_is_wrapped() -> None:
    # sksq96/pytorch-vae: `vae.decoder(sample)` in a cell after training; `vae = VAE()`
    # and VAE's __init__ builds `self.decoder` from modules: evidence, not the name
    source = '''
import torch
import torch.nn as nn


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(8, 4)
        self.decoder = nn.Sequential(nn.Linear(2, 8), nn.Sigmoid())

    def forward(self, x):
        h = self.encoder(x)
        return self.decoder(h[:, :2]), h


vae = VAE()
optimizer = torch.optim.Adam(vae.parameters())
for epoch in range(3):
    recon, h = vae(torch.rand(4, 8))
    loss = recon.sum() + h.pow(2).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"loss {loss.item():.3f}")

sample = torch.randn(16, 2)
recon_x = vae.decoder(sample)
print(recon_x.detach().shape)
'''
    assert _wrapped_lines(_check(source)) == ["recon_x = vae.decoder(sample)"]


# -- a test episode started as a process's target (A3C: `mp.Process(target=test, ...)`) --

A3C_TEST = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.multiprocessing as mp
from torch.distributions import Categorical


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 16)
        self.fc_pi = nn.Linear(16, 2)

    def pi(self, x):
        return F.softmax(self.fc_pi(F.relu(self.fc1(x))), dim=0)


def train(global_model, rank):
    optimizer = torch.optim.Adam(global_model.parameters(), lr=0.01)
    for step in range(10):
        loss = -torch.log(global_model.pi(torch.randn(4))).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def test(global_model):
    score = 0.0
    for n_epi in range(5):
        s = torch.randn(4)
        prob = global_model.pi(s)
        a = Categorical(prob).sample().item()
        score += a
    print(score)


if __name__ == "__main__":
    global_model = ActorCritic()
    global_model.share_memory()
    processes = []
    for rank in range(3):
        if rank == 0:
            p = mp.Process(target=test, args=(global_model,))
        else:
            p = mp.Process(target=train, args=(global_model, rank))
        p.start()
        processes.append(p)
    for p in processes:
        p.join()
'''


def test_a_test_episode_run_as_a_process_target_is_decorated() -> None:
    # a new process runs `test` with grad on (torch's default) and drops its result:
    # not a callback whose caller's grad mode is unseen
    result = _check(A3C_TEST)
    [finding] = [f for f in result.findings if "`test`" in f.message]
    assert "@torch.no_grad()\ndef test(global_model):" in result.fixed
    graph = _graph(A3C_TEST)
    [test] = [f for f in graph.functions.values() if f.node.name.value == "test"]
    assert test.thread_target and not test.passed_as_callback


def test_a_process_target_started_under_no_grad_is_silent() -> None:
    # a forked process inherits the grad mode of the thread that starts it
    source = A3C_TEST.replace(
        "            p = mp.Process(target=test, args=(global_model,))",
        "            with torch.no_grad():\n                p = mp.Process(target=test, args=(global_model,))",
    )
    assert not [f for f in _check(source).findings if "`test`" in f.message]


def test_a_function_passed_to_an_unknown_runner_stays_a_callback() -> None:
    source = A3C_TEST.replace("mp.Process(target=test, args=(global_model,))", "runner.launch(test, global_model)")
    assert not [f for f in _check(source).findings if "`test`" in f.message]


# -- a continuous-action rollout: the action is a distribution's `sample()` -------------

PPO_CONTINUOUS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal


class PPO(nn.Module):
    def __init__(self):
        super().__init__()
        self.data = []
        self.fc1 = nn.Linear(3, 64)
        self.fc_mu = nn.Linear(64, 1)
        self.fc_std = nn.Linear(64, 1)
        self.optimizer = torch.optim.Adam(self.parameters(), lr=0.0003)

    def pi(self, x):
        x = F.relu(self.fc1(x))
        return 2.0 * torch.tanh(self.fc_mu(x)), F.softplus(self.fc_std(x))

    def put_data(self, transition):
        self.data.append(transition)

    def train_net(self):
        s = torch.stack([t[0] for t in self.data])
        a = torch.stack([t[1] for t in self.data])
        mu, std = self.pi(s)
        loss = -Normal(mu, std).log_prob(a).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.data = []


def main():
    model = PPO()
    for n_epi in range(10):
        s = torch.randn(3)
        for t in range(20):
            mu, std = model.pi(s)
            dist = Normal(mu, std)
            a = dist.sample()
            log_prob = dist.log_prob(a)
            model.put_data((s, a, log_prob.item()))
            s = torch.randn(3)
        model.train_net()
'''


def test_a_rollout_whose_action_is_a_distribution_sample_is_wrapped() -> None:
    # `sample()` draws under no_grad: the stored action holds no graph, the log-prob
    # leaves through `.item()`, so the policy forward's graph dies each step
    assert _wrapped_lines(_check(PPO_CONTINUOUS)) == ["mu, std = model.pi(s)"]


def test_a_reparameterised_sample_keeps_the_graph() -> None:
    # `rsample()` keeps the graph back to mu and std, and the action is stored
    assert _wrapped_lines(_check(PPO_CONTINUOUS.replace("a = dist.sample()", "a = dist.rsample()"))) == []


def test_the_sample_method_of_a_name_that_is_no_distribution_keeps_the_graph() -> None:
    # `dist` bound to something else too: which `sample()` runs is not known
    source = PPO_CONTINUOUS.replace("            dist = Normal(mu, std)\n", "            dist = Normal(mu, std) if t else model.pi\n")
    assert source != PPO_CONTINUOUS
    assert _wrapped_lines(_check(source)) == []


# -- a weight converter (timm's convert_from_mxnet): its helper's parameter is a string --

CONVERTER = '''
import argparse

import torch
from gluoncv.model_zoo import get_model
from timm import create_model

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="all", type=str)
ALL = ["resnet18_v1b", "se_resnext50_32x4d"]


def convert(source_name, torch_name):
    net = get_model(source_name, pretrained=True)
    torch_net = create_model(torch_name)
    source_params = [(k, v) for k, v in net.collect_params().items() if "running" not in k]
    torch_params = {tn: torch.from_numpy(v.data().asnumpy()) for (tn, _), (_, v) in zip(torch_net.named_parameters(), source_params)}
    torch_net.load_state_dict(torch_params)
    torch.save(torch_net.state_dict(), "./%s.pth" % torch_name)


def map_to_torch_model(mx_name):
    torch_name = mx_name.lower()
    if torch_name.startswith("se_"):
        torch_name = torch_name.replace("se_", "se")
    return "gluon_" + torch_name


def main():
    args = parser.parse_args()
    if args.model == "all":
        for mx_model in ALL:
            torch_model = map_to_torch_model(mx_model)
            convert(mx_model, torch_model)
    else:
        mx_model = args.model
        torch_model = map_to_torch_model(mx_model)
        convert(mx_model, torch_model)
'''


def test_a_parameter_used_as_a_string_is_no_model_whatever_callers_call_it() -> None:
    # `mx_name.lower()`: nn.Module and tensors have no `lower`; the name `mx_model` of the
    # callers' argument does not make `map_to_torch_model` a forward, nor `main` an evaluation
    assert _check(CONVERTER).findings == []


def test_the_same_helper_running_a_model_is_still_a_forward() -> None:
    source = CONVERTER.replace("    torch_name = mx_name.lower()\n", "    torch_name = mx_name(torch.zeros(1)).argmax().item()\n")
    source = source.replace('return "gluon_" + torch_name', "return torch_name")
    assert source != CONVERTER
    assert _check(source).findings != []
