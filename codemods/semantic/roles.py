"""What a name says about the value it holds: one token vocabulary per role.

Evidence decides roles (a `torch.optim.Adam(...)` constructor, an `nn.Module`
annotation, `x.zero_grad()` with `x.step()`: see `role_evidence.roles_in`); the
vocabulary here only breaks ties, where no evidence decides. Before this module each
rule kept its own token set (AGF001 `MODEL_TOKENS`, tracking `MODEL_NAME_TOKENS`,
AGF008 `_GRAPH_CALLEE_TOKENS`, the `_MODEL` regex of verification's binder...), and
several said the same thing differently; here each role has exactly one vocabulary,
the union of the sets that agreed in meaning.

Some rules need a narrower or wider question than one role. Those are the named
*sub-roles* below (`NON_OPTIMIZER_STEPPER_TOKENS`, `CARRIED_STATE_TOKENS`,
`DATA_ITERABLE_TOKENS`, ...), built from the role vocabularies and documented with the
rule that needs them, never private sets inside a rule.

This module is one of the two parts of `codemods` that `verification` may import (the
other is the plain types in `codemods/model.py`): it imports neither libcst nor any other
`codemods` module, so the binder reads names with the same vocabulary as the rules.

Users extend it per project (`[tool.autograd-fix]` `<role>-names` / `<role>-objects`,
see `Vocabulary.extended`), as Ruff's `logger-objects` does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from enum import Enum
from types import MappingProxyType
from typing import Iterable, Mapping

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


@lru_cache(maxsize=8192)
def name_tokens(identifier: str) -> tuple[str, ...]:
    """`valDataLoader` / `val_data_loader` -> ('val', 'data', 'loader').

    Memoised: a file asks for the same few hundred names tens of thousands of times."""
    parts = []
    for chunk in identifier.split("_"):
        parts.extend(piece.lower() for piece in _CAMEL.split(chunk) if piece)
    return tuple(parts)


class Role(Enum):
    """What a value is for in training code."""

    MODEL = "model"
    OPTIMIZER = "optimizer"
    SCHEDULER = "scheduler"
    #: a `torch.cuda.amp.GradScaler`: `scaler.step(opt)` steps the optimizer it is given
    SCALER = "scaler"
    LOADER = "loader"
    #: a loss *function* (`nn.CrossEntropyLoss()`, `F.cross_entropy`)
    CRITERION = "criterion"
    #: a loss *value* (what `.backward()` is called on)
    LOSS = "loss"
    #: a batch of inputs
    INPUT = "input"
    TARGET = "target"
    #: recurrent state carried across iterations (hidden/cell state, memories)
    STATE = "state"
    DEVICE = "device"
    #: an object whose `.backward(loss)` runs the backward of its argument
    BACKWARD_RUNNER = "backward-runner"
    #: a function whose name says it evaluates (`validate`, `predict`)
    EVAL_SCOPE = "eval-scope"
    #: an iterable whose name says it yields evaluation batches (`val_loader`)
    EVAL_DATA = "eval-data"
    #: a helper whose name says it clears gradients (`zero_grads`, `clear_gradients`):
    #: one `CLEAR_TOKENS` token and one `GRAD_TOKENS` token
    GRAD_CLEARING = "grad-clearing"


#: AGF002: the clearing half of `Role.GRAD_CLEARING` (`reset_grads`, `zero_gradients`)
CLEAR_TOKENS = frozenset({"zero", "zeros", "zeroes", "clear", "reset", "none", "flush"})
#: AGF002: the gradient half of `Role.GRAD_CLEARING`
GRAD_TOKENS = frozenset({"grad", "grads", "gradient", "gradients"})

_VOCABULARY: Mapping[Role, frozenset[str]] = MappingProxyType(
    {
        # AGF001 MODEL_TOKENS, tracking MODEL_NAME_TOKENS, AGF008 _GRAPH_CALLEE_TOKENS' model
        # words, verification's _MODEL regex
        Role.MODEL: frozenset(
            {"model", "models", "net", "nets", "network", "networks", "encoder", "decoder",
             "backbone", "classifier", "detector", "segmenter", "segmentor", "generator", "discriminator",
             "teacher", "student", "policy", "critic", "actor", "unet", "vae", "ema", "netg", "netd", "head",
             "mlp", "cnn", "rnn", "lstm", "transformer", "transformers"}
        ),
        # loops OPTIMIZER_TOKENS, AGF009 _OPTIMIZER_TOKENS (less "scaler": Role.SCALER),
        # verification's _OPTIM regex
        Role.OPTIMIZER: frozenset(
            {"opt", "optim", "optimizer", "optimizers", "optimiser", "optimisers", "optimizer1", "optimizer2",
             "sgd", "adam", "adamw"}
        ),
        # gradmode's scheduler words, verification's _SCHED regex
        Role.SCHEDULER: frozenset({"sched", "scheduler", "schedulers", "schedule", "lrscheduler"}),
        Role.SCALER: frozenset({"scaler", "gradscaler"}),
        # verification's _LOADER regex, AGF011 _DATA_ITERABLE_TOKENS and AGF012 _DATA_TOKENS'
        # loader words
        Role.LOADER: frozenset(
            {"loader", "loaders", "dataloader", "dataloaders", "trainloader", "testloader", "valloader",
             "batches", "minibatches", "dataset", "datasets", "ds", "data", "iterator", "iter", "samples",
             "stream"}
        ),
        # AGF006 _LOSS_TOKENS' function words, verification's _CRIT regex (`loss_fn`: see
        # CRITERION_PHRASES)
        Role.CRITERION: frozenset({"criterion", "criteria", "crit", "objective", "lossfn"}),
        Role.LOSS: frozenset({"loss", "losses"}),
        # AGF011 _DATA_PARAMETER_TOKENS' input words
        Role.INPUT: frozenset({"x", "xb", "xs", "inputs", "input", "inp", "batch", "images", "image", "imgs", "img", "sample"}),
        # verification's _TARGET regex, AGF011 _DATA_PARAMETER_TOKENS' target words
        Role.TARGET: frozenset({"y", "yi", "yb", "t", "target", "targets", "label", "labels", "gt", "truth", "y_true"}),
        # AGF010 STATE_TOKENS, AGF011 _STATE_TOKENS
        Role.STATE: frozenset(
            {"hidden", "hiddens", "hid", "h", "hx", "h0", "hn", "ht", "c", "cx", "c0", "cn", "ct", "cell", "state",
             "states", "memory", "memories", "mem", "mems", "carry", "hc"}
        ),
        Role.DEVICE: frozenset({"device", "dev"}),
        # loops _WRAPPER_BACKWARD_TOKENS, AGF008 _BACKWARD_RUNNER_TOKENS
        Role.BACKWARD_RUNNER: frozenset(
            {"accelerator", "fabric", "engine", "trainer", "strategy", "amp", "deepspeed", "manual"}
        ),
        # AGF001 EVAL_NAME_TOKENS
        Role.EVAL_SCOPE: frozenset(
            {"validate", "validation", "val", "valid", "evaluate", "evaluation", "eval", "predict", "infer",
             "inference", "test", "testing"}
        ),
        # AGF001 EVAL_DATA_TOKENS
        Role.EVAL_DATA: frozenset({"val", "valid", "validation", "test", "testing", "eval", "evaluation", "holdout"}),
        # AGF002 _CLEAR_TOKENS | _GRAD_TOKENS (a name needs one of each: `clears_grads`)
        Role.GRAD_CLEARING: CLEAR_TOKENS | GRAD_TOKENS,
    }
)

#: consecutive tokens that name a criterion although each alone names something else
#: (verification's `loss_fn|loss_func|loss_function`)
CRITERION_PHRASES: frozenset[tuple[str, ...]] = frozenset({("loss", "fn"), ("loss", "func"), ("loss", "function")})

#: gradmode (sub-role, wider than `Role.SCHEDULER`): receivers whose `.step()` is not an
#: optimizer step: schedulers, and learning-rate warm-ups, SWA, progress bars and RL
#: environments (`lr_warmup.step()`, `pbar.step()`, `env.step(action)`). Not part of
#: the scheduler vocabulary: a parameter named `lr` is a number, not a scheduler.
NON_OPTIMIZER_STEPPER_TOKENS = _VOCABULARY[Role.SCHEDULER] | {"lr", "warmup", "swa", "progress", "pbar", "env"}

#: AGF009 (sub-role): receivers that step or unscale an optimizer's gradients
#: (`optimizer.step()`, `scaler.unscale_(opt)`)
OPTIMIZER_OR_SCALER_TOKENS = _VOCABULARY[Role.OPTIMIZER] | _VOCABULARY[Role.SCALER]

#: AGF011 (sub-role, wider than `Role.STATE`): names of values possibly carried from the
#: previous iteration; the rule stays away from them, so wider is the safe side
CARRIED_STATE_TOKENS = _VOCABULARY[Role.STATE] | {"prev", "previous", "cache"}
#: AGF011 (sub-role): calls that suggest state handling (`reset_hidden()`, `repackage(h)`)
STATE_CALL_TOKENS = frozenset({"hidden", "reset", "repackage", "detach", "state", "memory", "cache"})

#: AGF011, AGF012 (sub-role, wider than `Role.LOADER`): an iterable named so yields fresh
#: data batches (`for x, y in train_loader`, `enumerate(val_data)`): loaders, and the
#: split words that name one (`for batch in train:`)
DATA_ITERABLE_TOKENS = _VOCABULARY[Role.LOADER] | {"train", "val", "valid", "test", "batch"}

#: AGF011 (sub-role): parameters named so hold input data, not a tensor with a graph from
#: the caller: inputs, targets (less the single letter `t`, often a time step), devices
DATA_PARAMETER_TOKENS = (
    _VOCABULARY[Role.INPUT] | (_VOCABULARY[Role.TARGET] - {"t"}) | {"device", "dtype", "data", "samples"}
)

#: AGF008 (sub-role): callees whose result is (part of) the graph: models, criteria,
#: losses, and the module's own methods (`self(...)`, `self.encode(...)`)
GRAPH_CALLEE_TOKENS = _VOCABULARY[Role.MODEL] | _VOCABULARY[Role.CRITERION] | _VOCABULARY[Role.LOSS] | {"self"}

#: verification's binder (sub-role): words that say "a model" without saying which; the
#: other words of `netG` or `model_d` name the class to build. `module` is one for the
#: binder (a parameter named `module` gets a model) but not in `Role.MODEL`: for the rules
#: a callee ending in `modules` is nn.Module's API (`self.named_modules()`), not a forward
GENERIC_MODEL_TOKENS = frozenset({"net", "model", "network", "module", "m"})

#: tracking (sub-role): a callable named so is taken for an `nn.Module` (with other
#: evidence): models and criteria (`nn.CrossEntropyLoss()` is a module)
MODULE_CALLEE_TOKENS = _VOCABULARY[Role.MODEL] | _VOCABULARY[Role.CRITERION]

#: AGF001 (sub-role, narrower than `Role.EVAL_SCOPE`): an eval-named function whose name
#: also says it is part of training or of the forward itself (`train_and_validate`,
#: `forward_prediction_heads`, `validation_loss_fn`) is not an evaluation scope
NOT_EVAL_SCOPE_TOKENS = frozenset({"forward", "train", "training", "loss", "backward", "grad", "gradient"})
#: AGF001 (sub-role): a model-named callable with one of these tokens is a factory or a
#: utility about a model (`build_model`, `load_net`), not a forward pass
NOT_A_FORWARD_TOKENS = frozenset(
    {"get", "build", "create", "make", "load", "init", "setup", "save", "export", "prepare", "wrap", "unwrap",
     "compile", "copy", "freeze", "unfreeze", "summary", "count", "print", "log", "register", "to"}
)

_ROLE_INDEX: Mapping[Role, int] = MappingProxyType({role: index for index, role in enumerate(Role)})

#: `role_by_name` reads a name's words from the last (`model_optimizer` is an optimizer);
#: a word in several vocabularies takes the first of its roles in this order
_TIE_ORDER = (
    Role.OPTIMIZER, Role.SCHEDULER, Role.SCALER, Role.CRITERION, Role.LOADER, Role.MODEL, Role.LOSS,
    Role.DEVICE, Role.STATE, Role.TARGET, Role.INPUT,
)


@dataclass(frozen=True)
class Vocabulary:
    """The name tokens of every role, and the qualified names of factories whose
    results have a role; the defaults extended by a project's configuration.

    Immutable and picklable (it travels with each file's job to worker processes)."""

    #: one frozenset per role, in `Role` order
    tokens_by_role: tuple[frozenset[str], ...] = tuple(_VOCABULARY[role] for role in Role)
    #: (qualified name of a factory such as `mypkg.build_model`, the role of its result)
    objects: frozenset[tuple[str, Role]] = frozenset()

    def tokens(self, *roles: Role) -> frozenset[str]:
        """The union of the vocabularies of `roles`."""
        if len(roles) == 1:
            return self.tokens_by_role[_ROLE_INDEX[roles[0]]]
        return frozenset().union(*(self.tokens_by_role[_ROLE_INDEX[role]] for role in roles))

    def added(self, *roles: Role) -> frozenset[str]:
        """The words the project added to `roles` (`<role>-names`): a sub-role widened
        with them (`DATA_ITERABLE_TOKENS | vocabulary.added(Role.LOADER)`) hears the
        project's names as its base role does."""
        return self.tokens(*roles) - DEFAULT_VOCABULARY.tokens(*roles)

    def object_role(self, qualified: str | None) -> Role | None:
        """The configured role of what the factory `qualified` returns, if any."""
        return next((role for name, role in self.objects if name == qualified), None) if qualified else None

    def extended(self, names: Mapping[Role, Iterable[str]], objects: Mapping[Role, Iterable[str]]) -> "Vocabulary":
        """This vocabulary with more name tokens per role and more factories per role
        (`[tool.autograd-fix] model-names = ["mdl"]`, `optimizer-objects = ["mypkg.make_opt"]`)."""
        merged = tuple(
            tokens | {token.lower() for token in names.get(role, ())} for role, tokens in zip(Role, self.tokens_by_role)
        )
        factories = self.objects | {(qualified, role) for role, listed in objects.items() for qualified in listed}
        return Vocabulary(merged, frozenset(factories))

    def additions(self) -> dict[str, dict[str, list[str]]]:
        """What the project added to the defaults, as plain JSON data: `{"names": {role:
        [tokens]}, "objects": {role: [qualified names]}}`. Verification's requests are
        JSON lines to a worker process, so the configured roles travel in this form and
        `from_additions` rebuilds the vocabulary there."""
        names = {role.value: sorted(self.added(role)) for role in Role if self.added(role)}
        objects: dict[str, list[str]] = {}
        for qualified, role in sorted(self.objects, key=lambda item: (item[1].value, item[0])):
            objects.setdefault(role.value, []).append(qualified)
        return {"names": names, "objects": objects}

    @classmethod
    def from_additions(cls, data: Mapping[str, Mapping[str, Iterable[str]]] | None) -> "Vocabulary":
        """The defaults extended by `additions()`'s data (None or empty: the defaults)."""
        if not data or not (data.get("names") or data.get("objects")):
            return DEFAULT_VOCABULARY
        names = {Role(role): list(tokens) for role, tokens in (data.get("names") or {}).items()}
        objects = {Role(role): list(listed) for role, listed in (data.get("objects") or {}).items()}
        return DEFAULT_VOCABULARY.extended(names, objects)

    def has(self, name: str | None, *roles: Role) -> bool:
        """Does any token of `name` (an identifier, or a dotted name's last part) belong
        to one of `roles`? `self.g_optimizer` has Role.OPTIMIZER; `loss_fn` has
        Role.CRITERION through `CRITERION_PHRASES`."""
        if not name:
            return False
        tokens = name_tokens(name.rsplit(".", 1)[-1])
        if set(tokens) & self.tokens(*roles):
            return True
        return Role.CRITERION in roles and _has_phrase(tokens)

    def has_any(self, tokens: Iterable[str], *roles: Role) -> bool:
        """Does one of `tokens` (already split) belong to one of `roles`?"""
        vocabulary = self.tokens(*roles)
        return any(token in vocabulary for token in tokens)

    def is_exactly(self, name: str, role: Role) -> bool:
        """Is the whole name (`y_true`, `labels`) a word of `role`'s vocabulary?"""
        return "_".join(name_tokens(name)) in self.tokens(role)

    def ends_as(self, name: str, role: Role) -> bool:
        """Is the name's last token a word of `role` (`train_device`, `val_loader`)?"""
        tokens = name_tokens(name.rsplit(".", 1)[-1])
        return bool(tokens) and tokens[-1] in self.tokens(role)

    def role_by_name(self, name: str) -> Role | None:
        """The tie-break: the role a name reads as, or None. A criterion phrase
        (`loss_fn`) first, then the last token with a role (`val_loader`, `g_optimizer`,
        `model_optimizer`), then `_TIE_ORDER` among the other tokens' roles."""
        tokens = name_tokens(name.rsplit(".", 1)[-1])
        if _has_phrase(tokens):
            return Role.CRITERION
        tie_roles = self._tie_roles
        for token in reversed(tokens):
            role = tie_roles.get(token)
            if role is not None:
                return role
        return None

    @cached_property
    def _tie_roles(self) -> dict[str, Role]:
        """token -> the first role of `_TIE_ORDER` whose words hold it (`role_by_name`'s
        inner search, made once per vocabulary; a plain dict: the vocabulary is pickled
        for worker processes, with this in it once made)."""
        found: dict[str, Role] = {}
        for role in _TIE_ORDER:
            for token in self.tokens(role):
                found.setdefault(token, role)
        return found


def _has_phrase(tokens: tuple[str, ...]) -> bool:
    return any(tuple(tokens[i : i + 2]) in CRITERION_PHRASES for i in range(len(tokens) - 1))


#: the vocabulary without project configuration
DEFAULT_VOCABULARY = Vocabulary()

#: roles a project may extend in `[tool.autograd-fix]` (`<role>-names`, `<role>-objects`)
CONFIGURABLE_ROLES = (
    Role.MODEL, Role.OPTIMIZER, Role.SCHEDULER, Role.LOADER, Role.CRITERION, Role.LOSS, Role.STATE, Role.DEVICE,
    Role.TARGET,
)

# The rules' historical names for the vocabularies they share (AGF001 keeps these names).
MODEL_TOKENS = _VOCABULARY[Role.MODEL]
EVAL_SCOPE_TOKENS = _VOCABULARY[Role.EVAL_SCOPE]
EVAL_DATA_TOKENS = _VOCABULARY[Role.EVAL_DATA]


def looks_like_model(identifier: str, model_tokens: frozenset[str]) -> bool:
    """A name tie-break, for where no evidence decides: `model`, `seg_model`, `model_ema`, `netG`, `teacher`; not `model_validate` or
    `build_model`: the name must end in a model word (the project's vocabulary), or be
    one followed only by short qualifiers (`netG`, `model_a`, `model2`)."""
    tokens = name_tokens(identifier)
    if not tokens or set(tokens) & NOT_A_FORWARD_TOKENS:
        return False
    if tokens[-1] in model_tokens:
        return True
    return tokens[0] in model_tokens and all(len(token) <= 2 for token in tokens[1:])
