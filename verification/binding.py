"""Bind a function unit's parameters and free names to values, by role.

Runs inside a run child (it builds tensors). Both sides of a patch bind after identical
seeding, so they receive identical values.

Roles come from, in order: a user factory (see `autograd_fix.verification.config`), the
parameter's default value, its annotation, the unit body's evidence (``k.transpose()``,
``x @ w``, ``model(real)`` make tensors, see `evidence`), then its name (and, for tensors,
a parameter whose ``.grad`` the body reads gets ``requires_grad=True``). Models are bound
first because the other roles take their shapes from them at run time: the input from the
layer the forward reaches first (see `shapes`: a few candidate plans, the first the model
accepts wins, and the worker may pick a later one when the original unit still raises a
shape error), the target shape (and whether targets are class indices) from the model's
output and the loss the unit uses.
"""

from __future__ import annotations

import ast
import builtins
import copy
import importlib
import inspect
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from autograd_fix.codemods.semantic.roles import DEFAULT_VOCABULARY, GENERIC_MODEL_TOKENS, Role, Vocabulary, name_tokens

from .evidence import UnitText, read_unit
from .shapes import (
    FEATURES,
    MAX_BATCH,
    Layout,
    module_feature_sizes,
    tensor_layouts,
    Plan,
    SliceExpired,
    forwards_in,
    model_plans,
    run_sliced,
    tensor_shape,
    with_rank,
    with_stepped_axes,
)
from .targets import class_count, criterion_for, loss_kind, loss_output, make_target

BATCH = MAX_BATCH
N_BATCHES = 3
#: seconds one candidate input may take through the model before the next is tried
PLAN_SLICE_S = 2.0

_TENSOR = re.compile(
    r"^(x|xs|xi|x_\w+|xb|inp|input|inputs|image|images|img|imgs|batch|features|feats|feat|h|hidden|z|a|b|u|v|w|"
    r"weight|weights|bias|tensor|t_\w+|logits|pred|preds|prediction|predictions|out|output|outputs|grad_output|"
    r"grad|grads|src|tgt|seq|tokens|emb|embeddings|q|k_|query|key|value|mask|sample)$"
)
_BOOL = re.compile(r"^(is_|use_|do_|has_|should_|enable|disable|verbose|debug|amp|inplace|train$|training$|shuffle|flag|return_|dry_run)")
#: number roles are decided by the name's last token that reads as one ("accum_steps"
#: is an int although it contains "eps"; "max_norm" a float although it starts with "max")
_FLOAT_TOKENS = {
    "lr", "learning", "rate", "alpha", "beta", "beta1", "beta2", "gamma", "eps", "epsilon", "momentum", "wd",
    "decay", "scale", "temperature", "temp", "tau", "clip", "norm", "threshold", "margin", "dropout", "p", "ratio",
    "factor", "lambda", "lam", "coef", "coeff", "std", "sigma", "noise", "smoothing", "mu",
}
_INT_TOKENS = {
    "epoch", "epochs", "steps", "step", "n", "k", "num", "iters", "iterations", "accum", "accumulation", "interval",
    "every", "bs", "size", "dim", "count", "classes", "seed", "i", "idx", "index", "horizon", "depth", "width",
    "channels", "patience", "rank", "world", "len", "length", "layers", "heads", "freq", "frequency",
}


def _tokens(name: str) -> tuple[str, ...]:
    return name_tokens(name)


def number_kind(name: str) -> type | None:
    """``int`` or ``float`` when the name reads as a number, else None."""
    for token in reversed(_tokens(name)):
        if token in _INT_TOKENS:
            return int
        if token in _FLOAT_TOKENS:
            return float
    return None


def model_name(name: str, roles: Vocabulary = DEFAULT_VOCABULARY) -> bool:
    """Does the name read as a model in `roles` (the project's vocabulary)? ("netG" reads
    as "net_g": camelCase parts are words; a plural "encoders" too). Not when its last
    word reads as a number: `model_dim`, `num_heads` and `ema_decay` are numbers about a
    model."""
    tokens = _tokens(name)
    if name == "m" or not tokens:
        return name == "m"
    if tokens[-1] in _INT_TOKENS or tokens[-1] in _FLOAT_TOKENS:
        return False
    words = roles.tokens(Role.MODEL) | GENERIC_MODEL_TOKENS
    return any(token in words or (token.endswith("s") and token[:-1] in words) for token in tokens)


def reads_as(name: str, role: Role, roles: Vocabulary = DEFAULT_VOCABULARY) -> bool:
    """Role by name in `roles` (the vocabulary the rules use, `codemods.semantic.roles`,
    extended by the project's `<role>-names`), as the binder asks it: a target only by
    its whole name (`y`, `labels`: not `y_pred`, `label_smoothing`), a device or a loss by
    its last word (`train_device`, `val_loss`), the other roles by any word
    (`g_optimizer`, `lr_sched`, `loss_fn`, `val_loader`)."""
    if role is Role.TARGET:
        return roles.is_exactly(name, role)
    if role in (Role.DEVICE, Role.LOSS):
        return roles.ends_as(name, role) and not roles.has(name, Role.CRITERION)
    return roles.has(name, role)


class _TokenPattern:
    """`search` by number role, so the regex-style call sites read alike."""

    def __init__(self, kind: type) -> None:
        self.kind = kind

    def search(self, name: str) -> bool:
        return number_kind(name) is self.kind


_FLOAT = _TokenPattern(float)
_INT = _TokenPattern(int)



class Unbindable(Exception):
    """A name got no value; `name` and `why` go into the `unverified` verdict."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"cannot bind {name!r}: {why}")
        self.name = name
        self.why = why


class _TooSlow(Unbindable):
    """A candidate input ran past its slice: the next, no smaller, would too."""


@dataclass
class Binder:
    """Builds values for names; one per run child."""

    namespace: dict[str, Any]
    source: str
    device: torch.device
    factories: dict[str, str] = field(default_factory=dict)
    factory_root: str | None = None
    dtype: torch.dtype = torch.float32
    #: give every floating tensor input requires_grad (contracts about gradients)
    tensors_require_grad: bool = False
    #: the unit's qualified name: its body is the evidence for roles and the loss kind
    qualname: str | None = None
    #: a fixed candidate input plan (the one that ran the original); None: search
    plan: int | None = None
    #: the role vocabulary: the defaults extended by the project's `<role>-names`
    #: (`Vocabulary.from_additions` of the request's "roles"), so a project that calls
    #: its models `resnet` gets them bound as models, as its rules read them
    roles: Vocabulary = DEFAULT_VOCABULARY
    #: the project's own call of the function (`call_sites.CallSite.to_json`): the
    #: arguments it builds are bound from its recipe before any role is guessed
    call_site: dict[str, Any] | None = None
    values: dict[str, Any] = field(default_factory=dict)
    described: dict[str, str] = field(default_factory=dict)
    _model: nn.Module | None = None
    _shapes: dict[str, Any] | None = None
    _unit: UnitText | None = None
    _tree: ast.Module | None = None
    _forward_defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None
    _plans: list[Plan] | None = None
    _plan_index: int | None = None
    _plain_tensors: int = 0
    _first_param: str | None = None
    _site_values: dict[str, Any] | None = None

    def plan_record(self) -> dict[str, Any] | None:
        """Which candidate input plan this run used and how many there are (for the
        worker's search), or None when no synthesized tensor depended on one."""
        if self._plans is not None and self._plan_index is not None:
            return {"index": self._plan_index, "count": len(self._plans), "shape": self._plans[self._plan_index].describe()}
        if self._plain_tensors:
            index, layouts = self._layout(), self._layouts()
            return {"index": index, "count": len(layouts), "shape": f"plain tensors, {layouts[index][0]}"}
        return None

    # -- public -------------------------------------------------------------------
    def bind_call(self, fn: Callable, names: list[str], skip_first: bool = False) -> tuple[list[Any], dict[str, Any]]:
        """Positional/keyword arguments for `fn`; globals in `names` go into the namespace."""
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        if skip_first and params:
            params = params[1:]
        self._first_param = params[0].name if params else None
        # models first: everything else takes shapes from them
        ordered = sorted(params, key=lambda p: 0 if self._looks_like_model(p.name, p.annotation) else 1)
        bound: dict[str, Any] = {}
        for param in ordered:
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            given = param.name in self.factories or param.name in ((self.call_site or {}).get("arguments") or {})
            if not given and param.default is not inspect.Parameter.empty:
                continue
            bound[param.name] = self.value(param.name, param.annotation)
        for name in sorted(names, key=lambda n: 0 if self._looks_like_model(n, inspect.Parameter.empty) else 1):
            if name not in self.namespace:
                self.namespace[name] = self.value(name, inspect.Parameter.empty)
        args, kwargs = [], {}
        for param in params:
            if param.name not in bound:
                continue
            if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
                args.append(bound[param.name])
            else:
                kwargs[param.name] = bound[param.name]
        return args, kwargs

    def value(self, name: str, annotation: Any = inspect.Parameter.empty) -> Any:
        if name in self.values:
            return self.values[name]
        value = self._build(name, annotation)
        self.values[name] = value
        return value

    # -- roles --------------------------------------------------------------------
    def _reads_as(self, name: str, role: Role) -> bool:
        return reads_as(name, role, self.roles)

    def _looks_like_model(self, name: str, annotation: Any) -> bool:
        text = self._annotation_text(annotation)
        return model_name(name, self.roles) or text.endswith("Module") or text in self._module_classes_names()

    @staticmethod
    def _annotation_text(annotation: Any) -> str:
        if annotation is inspect.Parameter.empty:
            return ""
        if isinstance(annotation, str):
            return annotation
        return getattr(annotation, "__qualname__", None) or getattr(annotation, "__name__", "") or str(annotation)

    def _build(self, name: str, annotation: Any) -> Any:
        if name in self.factories:
            return self._from_factory(name)
        site_values = self._from_call_site()
        if name in site_values:
            return self._site_value(name, site_values[name])
        lowered = name.lower()
        ann = self._annotation_text(annotation)
        if ann:
            by_annotation = self._by_annotation(name, ann)
            if by_annotation is not None:
                return by_annotation
        use = self.unit().uses.get(name)
        if use is not None and use.reads_as_tensor and not self._looks_like_model(name, annotation):
            return self._evident_tensor(name, lowered)
        if use is not None and use.module and not self._reads_as(name, Role.OPTIMIZER):
            return self._bind_model(name)
        if use is not None and use.unpacked and not (self._reads_as(name, Role.LOADER) and use.iterated):
            batch = self._loader(name)[0]
            self.described[name] = f"one batch (x {list(batch[0].shape)}, y {list(batch[1].shape)})"
            return batch
        if self._reads_as(name, Role.DEVICE):
            self.described[name] = f"device {self.device}"
            return self.device
        if self._looks_like_model(name, annotation):
            return self._bind_model(name)
        if self._reads_as(name, Role.OPTIMIZER):
            model = self.model()
            if "adam" in lowered:
                opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            else:
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
            self.described[name] = f"{type(opt).__name__} over the model's parameters"
            return opt
        if self._reads_as(name, Role.SCHEDULER):
            opt = next((v for v in self.values.values() if isinstance(v, torch.optim.Optimizer)), None)
            if opt is None:
                opt = self.value("optimizer")
            self.described[name] = "StepLR(step_size=1)"
            return torch.optim.lr_scheduler.StepLR(opt, step_size=1)
        if self._reads_as(name, Role.CRITERION):
            return self._criterion(name)
        if self._reads_as(name, Role.LOADER):
            return self._loader(name)
        if self._reads_as(name, Role.TARGET):
            return self._target(name)
        if self._reads_as(name, Role.LOSS):
            return self._loss(name)
        if _BOOL.search(lowered):
            value = lowered in ("train", "training")
            self.described[name] = repr(value)
            return value
        if _FLOAT.search(lowered):
            return self._number(name, float)
        if _INT.search(lowered):
            return self._number(name, int)
        if _TENSOR.search(lowered):
            return self._tensor(name)
        use = self.unit().uses.get(name)
        if use is not None and use.called and self._module_classes():
            # called like a module (``G(z)``) in a file that defines modules
            return self._bind_model(name)
        raise Unbindable(
            name,
            "no role inferred from its name, annotation, default or use in the body"
            f"{self._no_sign(name)}; add a factory under "
            f"[tool.autograd-fix.verify] in pyproject.toml, e.g. {name} = \"mypkg.testing:make_{name}\"",
        )

    def unit(self) -> UnitText:
        """The unit's body as evidence (parsed once per binder)."""
        if self._unit is None:
            self._unit = read_unit(self.source, self.qualname, self._is_module_callee, self._parsed())
        return self._unit

    def _parsed(self) -> ast.Module | None:
        """The source's syntax tree, parsed once per binder (each question parsed the
        whole file again: a cost per run that grew with its length); None if it does
        not parse."""
        if self._tree is None:
            try:
                self._tree = ast.parse(self.source)
            except (SyntaxError, ValueError):
                return None
        return self._tree

    def _forwards(self) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
        if self._forward_defs is None:
            tree = self._parsed()
            self._forward_defs = forwards_in(tree) if tree is not None else {}
        return self._forward_defs

    def _is_module_callee(self, func: ast.expr, owner: Any = None) -> bool:
        """A callee in the unit's body that is a module: ``self.<layer>`` of a bound
        instance (or of `owner`), a module-level module, or a name that reads as a model."""
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            owner = owner if owner is not None else self.values.get("self")
            try:
                return isinstance(getattr(owner, func.attr, None), nn.Module)
            except Exception:  # noqa: BLE001 - a property that raises is not a layer
                return False
        if isinstance(func, ast.Name):
            return isinstance(self.namespace.get(func.id), nn.Module) or model_name(func.id, self.roles)
        root = func
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        # ``model.decoder(z)``: a part of a model (resolved once the model is bound)
        return isinstance(root, ast.Name) and root.id != "self" and model_name(root.id, self.roles)

    def _resolve_module(self, callee: ast.expr, self_value: Any = None) -> nn.Module | None:
        """The module a callee expression names, among bound values and globals
        (``self`` is `self_value`, else the bound instance)."""
        if isinstance(callee, ast.Name):
            value = self.values.get(callee.id, self.namespace.get(callee.id))
            return value if isinstance(value, nn.Module) else None
        if isinstance(callee, ast.Subscript):
            container = self._resolve_module(callee.value, self_value)
            return container[0] if isinstance(container, (nn.ModuleList, nn.Sequential)) and len(container) else None
        if isinstance(callee, ast.Attribute):
            if isinstance(callee.value, ast.Name) and callee.value.id == "self":
                owner: Any = self_value if self_value is not None else self.values.get("self")
            else:
                owner = self._resolve_module(callee.value, self_value)
            try:
                value = getattr(owner, callee.attr, None) if owner is not None else None
            except Exception:  # noqa: BLE001 - a property that raises is not a layer
                return None
            return value if isinstance(value, nn.Module) else None
        return None

    def _no_sign(self, name: str) -> str:
        use = self.unit().uses.get(name)
        if use is None:
            return ""
        if use.called:
            return " (the body calls it, but it is not a module or class of this file)"
        if use.iterated:
            return " (the body iterates over it)"
        return " (no tensor method, @, torch call or model call on it in the body)"

    def _evident_tensor(self, name: str, lowered: str) -> Any:
        """A parameter the body uses as a tensor: a target or loss when its name says so,
        else an input tensor."""
        why = self.unit().uses[name].tensor
        if self._reads_as(name, Role.TARGET):
            return self._target(name)
        if self._reads_as(name, Role.LOSS):
            return self._loss(name)
        value = self._tensor(name)
        self.described[name] += f" ({why})"
        return value

    def _by_annotation(self, name: str, ann: str) -> Any:
        short = ann.split(".")[-1].split("[")[0]
        if short in ("Module", "Sequential") or short in self._module_classes_names():
            return self._bind_model(name, preferred=short if short in self._module_classes_names() else None)
        if short == "Tensor":
            return self._tensor(name)
        if short in ("Optimizer", "SGD", "Adam", "AdamW"):
            return self._build(name if self._reads_as(name, Role.OPTIMIZER) else "optimizer", inspect.Parameter.empty)
        if short in ("DataLoader", "Iterable", "Iterator", "Sequence", "list"):
            return self._loader(name)
        if short == "device":
            self.described[name] = f"device {self.device}"
            return self.device
        if short == "bool":
            return _BOOL.search(name.lower()) is not None and name.lower() in ("train", "training")
        if short == "int":
            return self._number(name, int)
        if short == "float":
            return self._number(name, float)
        return None

    def _number(self, name: str, kind: type) -> Any:
        tokens = set(_tokens(name))
        floats = [
            ({"lr", "learning", "rate"}, 0.1),
            ({"eps", "epsilon"}, 1e-6),
            ({"momentum", "beta", "beta1", "beta2"}, 0.9),
            ({"decay", "wd", "dropout", "p", "noise", "smoothing"}, 0.0),
        ]
        ints = [
            ({"epoch", "epochs"}, 2),
            ({"accum", "accumulation"}, 2),
            ({"interval", "every", "freq", "frequency"}, 1),
            ({"bs", "batch"}, BATCH),
            ({"seed", "rank", "i", "idx", "index"}, 0),
            ({"world"}, 1),
        ]
        value: Any
        if kind is float:
            value = next((v for names, v in floats if tokens & names), 1.0)
        elif "classes" in tokens:
            value = int(self.shapes()["classes"])
        else:
            value = next((v for names, v in ints if tokens & names), 2)
        self.described[name] = repr(value)
        return value

    # -- models -------------------------------------------------------------------
    def _module_classes(self) -> list[type]:
        module_name = self.namespace.get("__name__")
        return [
            value
            for value in self.namespace.values()
            if isinstance(value, type)
            and issubclass(value, nn.Module)
            and value.__module__ == module_name
        ]

    def _module_classes_names(self) -> set[str]:
        return {cls.__name__ for cls in self._module_classes()}

    def _construct(self, cls: type) -> nn.Module | None:
        """An instance from its constructor's defaults and number-like names; failing
        that, with 1 for the arguments no name explains (``ngpu``, ``nc``)."""
        return self._construct_with(cls, lenient=False) or self._construct_with(cls, lenient=True)

    @staticmethod
    def _construct_with(cls: type, lenient: bool) -> nn.Module | None:
        try:
            sig = inspect.signature(cls.__init__)
            kwargs: dict[str, Any] = {}
            for param in list(sig.parameters.values())[1:]:
                if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.default is not inspect.Parameter.empty:
                    continue
                lowered = param.name.lower()
                if _INT.search(lowered) or _FLOAT.search(lowered):
                    kwargs[param.name] = 8 if _INT.search(lowered) else 0.1
                elif lenient:
                    kwargs[param.name] = 1
                else:
                    return None
            return cls(**kwargs)
        except Exception:  # noqa: BLE001 - any failure just means "not this class"
            return None

    def _bind_model(self, name: str, preferred: str | None = None) -> nn.Module:
        candidates = self._module_classes()
        tokens = set(re.split(r"_+", name.lower()))
        chosen: type | None = None
        if preferred:
            chosen = next((c for c in candidates if c.__name__ == preferred), None)
        if chosen is None:
            chosen = next((c for c in candidates if c.__name__.lower() in tokens or name.lower() in c.__name__.lower()), None)
        if chosen is None:
            # "netG", "modelD", "G": the word beside the generic one names the class
            specific = [t for t in _tokens(name) if t not in GENERIC_MODEL_TOKENS]
            chosen = next((c for c in candidates if any(c.__name__.lower().startswith(t) for t in specific)), None)
        model: nn.Module | None = None
        if chosen is not None:
            model = self._construct(chosen)
        if model is None:
            rng = torch.get_rng_state()
            sizes = []
            for cls in candidates:
                instance = self._construct(cls)
                if instance is not None:
                    sizes.append((sum(p.numel() for p in instance.parameters()), cls))
            torch.set_rng_state(rng)
            if sizes:
                best = max(sizes, key=lambda item: item[0])[1]
                model = self._construct(best)
        if model is None:
            model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
            self.described[name] = "default MLP Linear(8,16)-ReLU-Linear(16,4)"
        else:
            self.described[name] = f"{type(model).__name__}()"
        model = model.to(self.device)
        if self.dtype != torch.float32:
            model = model.to(self.dtype)
        if self._model is None:
            self._model = model
        return model

    def model(self) -> nn.Module:
        if self._model is None:
            self.values.setdefault("<implicit model>", self._bind_model("model"))
        assert self._model is not None
        return self._model

    # -- shapes -------------------------------------------------------------------
    def _has_model(self) -> bool:
        return self._model is not None or any(isinstance(v, nn.Module) for v in self.values.values()) or bool(
            self._module_classes()
        )

    def shapes(self) -> dict[str, Any]:
        """One input batch and its target: the input from the first candidate plan the
        model accepts (or the fixed `plan`), the target from the output and the loss."""
        if self._shapes is not None:
            return self._shapes
        model = self.model()
        plans = self._plans = model_plans(model, self.source, self._forwards())
        rng = self._rng_state()
        if self.plan is not None:
            index = min(max(self.plan, 0), len(plans) - 1)
            out = None
        else:
            index, out = self._first_accepted(model, plans)
        # identical tensors whether the plan was searched for or given: the trials'
        # and the probe's draws (inputs, dropout) are undone
        self._set_rng_state(rng)
        self._plan_index = index
        x = plans[index].build(self.device, self.dtype)
        after_input = self._rng_state()
        if out is None:
            try:
                out = self._probe(model, x, plans[index])
            except Unbindable:
                # the unit feeds this batch to a part of the model (``model.decoder(z)``):
                # the targets still come from what the whole model returns
                out = self._first_accepted(model, plans)[1]
            self._set_rng_state(after_input)
        out = self._loss_output(out)
        unit = self.unit()
        kind = loss_kind(out, unit.names, self.namespace, (unit.text, self.source))
        classes = class_count(out)
        target_dtype = out.dtype if out.is_floating_point() else self.dtype
        target = make_target(kind, out.shape, classes, self.device, target_dtype)
        self._shapes = {"x": x, "target": target, "classes": classes, "loss": kind, "out_shape": out.shape}
        return self._shapes

    def _rng_state(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        cuda = torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None
        return torch.get_rng_state(), cuda

    def _set_rng_state(self, state: tuple[torch.Tensor, torch.Tensor | None]) -> None:
        torch.set_rng_state(state[0])
        if state[1] is not None:
            torch.cuda.set_rng_state(state[1], self.device)

    def _first_accepted(self, model: nn.Module, plans: list[Plan]) -> tuple[int, Any]:
        rejected = []
        for index, plan in enumerate(plans):
            x = plan.build(self.device, self.dtype)
            try:
                return index, self._probe(model, x, plan)
            except _TooSlow:
                raise
            except Unbindable as exc:
                rejected.append(f"{list(plan.shape)}: {exc.why}")
        raise Unbindable(
            "inputs",
            f"the model rejected every synthesized batch ({len(plans)} tried, from its first layers): " + "; ".join(rejected),
        )

    def _probe(self, model: nn.Module, x: torch.Tensor, plan: Plan) -> Any:
        """The model's output on `x`, from a copy (the real model's state stays untouched)."""
        probe = copy.deepcopy(model)
        extras = self._forward_extras(model)

        def forward() -> Any:
            with torch.no_grad():
                return probe(x, *extras)

        try:
            return run_sliced(PLAN_SLICE_S, forward)
        except SliceExpired as exc:
            raise _TooSlow("inputs", f"the model's forward on a batch {plan.describe()} ran {exc}") from None
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a rejected shape is the expected failure
            first_line = (str(exc).strip().splitlines() or [""])[0][:200]
            raise Unbindable("inputs", f"{type(exc).__name__}: {first_line}") from exc

    def _forward_extras(self, model: nn.Module) -> list[torch.Tensor]:
        """Tensors for a forward's further required inputs (``forward(self, x,
        time_emb)``), each shaped for the layer the forward feeds it to."""
        try:
            params = list(inspect.signature(model.forward).parameters.values())[1:]
        except (TypeError, ValueError):
            return []
        required = [
            p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is inspect.Parameter.empty
        ]
        if not required:
            return []
        uses = read_unit(
            self.source, f"{type(model).__qualname__}.forward", lambda func: self._is_module_callee(func, model), self._parsed()
        ).uses
        extras = []
        for param in required:
            use = uses.get(param.name)
            layer = self._resolve_module(use.callee, model) if use is not None and use.callee is not None else None
            plan = model_plans(layer, self.source, self._forwards())[0] if layer is not None else Plan((MAX_BATCH, FEATURES), "no known layer")
            extras.append(plan.build(self.device, self.dtype))
        return extras

    @staticmethod
    def _loss_output(out: Any) -> torch.Tensor:
        tensor = loss_output(out)
        if tensor is None:
            raise Unbindable("targets", f"the model's output is a {type(out).__name__}, not a tensor")
        return tensor

    def _plan_input(self) -> torch.Tensor:
        """Another batch of the chosen plan's shape (for a loader's later batches)."""
        self.shapes()
        assert self._plans is not None and self._plan_index is not None
        return self._plans[self._plan_index].build(self.device, self.dtype)

    # -- other roles --------------------------------------------------------------
    def _target(self, name: str) -> torch.Tensor:
        shapes = self.shapes()
        target = shapes["target"]
        kind = {"ce": "class indices", "bce": "values in [0, 1]"}.get(shapes["loss"], "values")
        self.described[name] = f"targets {list(target.shape)} ({kind})"
        return target.clone()

    def _loss(self, name: str) -> torch.Tensor:
        shapes = self.shapes()
        model = self.model()
        loss = self._loss_output(model(shapes["x"], *self._forward_extras(model))).float().pow(2).mean()
        self.described[name] = "scalar loss of the model on one batch (with graph)"
        return loss

    def _loader(self, name: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
        first = self.shapes()
        batches = [(first["x"].clone(), first["target"].clone())]
        for _ in range(N_BATCHES - 1):
            x = self._plan_input()
            dtype = first["target"].dtype if first["target"].is_floating_point() else self.dtype
            y = make_target(first["loss"], first["out_shape"], first["classes"], self.device, dtype)
            batches.append((x, y))
        last_x, last_y = batches[-1]
        partial = ""
        if last_x.dim() and last_y.dim() and last_x.shape[0] == last_y.shape[0] >= 2:
            # as a DataLoader without drop_last: the last batch is smaller, so code that
            # weights batches (a mean of means, `* len(y)`) shows what it computes
            half = last_x.shape[0] // 2
            batches[-1] = (last_x[:half].clone(), last_y[:half].clone())
            partial = f", the last of {half}"
        self.described[name] = f"{N_BATCHES} batches of (x {list(first['x'].shape)}, y {list(first['target'].shape)}){partial}"
        return batches

    def _criterion(self, name: str) -> nn.Module:
        crit = criterion_for(self.shapes()["loss"])
        self.described[name] = f"{type(crit).__name__}()"
        return crit

    def _layouts(self) -> tuple[Layout, ...]:
        """Plain-tensor layouts; a method of a module also tries its layers' own sizes."""
        owner = self.values.get("self")
        return tensor_layouts(module_feature_sizes(owner) if isinstance(owner, nn.Module) else ())

    def _layout(self) -> int:
        return min(max(self.plan or 0, 0), len(self._layouts()) - 1)

    def _tensor(self, name: str) -> torch.Tensor:
        """An input tensor: shaped like the model's batch when there is a model, else by
        the plain-tensor layout (the body's matrix products decide the first one)."""
        base: torch.Tensor | None = None
        use = self.unit().uses.get(name)
        layer = self._resolve_module(use.callee) if use is not None and use.callee is not None else None
        if layer is not None and self._model is not None and self.values.get("self") is self._model and name == self._first_param:
            layer = self._model  # the first input of the model's own method: the model's input
        if layer is not None and layer is not self._model:
            # fed to a part of a model or a layer of its own: shaped for that
            plan = model_plans(layer, self.source, self._forwards())[0]
            base = plan.build(self.device, self.dtype)
        elif self._has_model():
            try:
                base = self.shapes()["x"].clone()
                if use is not None and use.matrix and base.is_floating_point() and base.dim() >= 2:
                    # ``x @ w`` beside a model: a square weight over the batch's features
                    features = base.shape[-1]
                    base = torch.randn(features, features, device=self.device, dtype=self.dtype)
            except Unbindable:
                if layer is not None:
                    raise  # the body feeds it to the model: the model's refusal is the reason
                base = None
        if base is None:
            shape = tensor_shape(self._layout(), self._plain_tensors, bool(use and use.matrix), self._layouts())
            self._plain_tensors += 1
            base = torch.randn(*shape, device=self.device, dtype=self.dtype)
        if use is not None and 0 < base.dim() < use.min_rank:
            base = with_rank(base, use.min_rank)
        if use is not None and use.stepped_axes and base.dim():
            base = with_stepped_axes(base, use.stepped_axes)
        needs_grad = bool(re.search(rf"\b{re.escape(name)}\.grad\b", self.source)) and not re.search(
            rf"\b{re.escape(name)}\.requires_grad", self.source
        )
        if (needs_grad or self.tensors_require_grad) and base.is_floating_point():
            base.requires_grad_(True)
        self.described[name] = f"tensor {list(base.shape)}{' requires_grad' if base.requires_grad else ''}"
        return base

    def site_gives(self, name: str) -> bool:
        """Whether the project's own call site rebuilt `name` (its recipe ran): a
        method's ``self`` is then that instance, not one built from synthesized
        constructor arguments."""
        return name in self._from_call_site()

    def _from_call_site(self) -> dict[str, Any]:
        """The arguments the project's own call builds, by parameter name (run once: its
        recipe, then each argument's expression); {} when there is none or it failed, the
        failure then said in `described` and every input synthesized as before."""
        if self._site_values is not None:
            return self._site_values
        self._site_values = {}
        site = self.call_site
        if not site or not site.get("arguments"):
            return self._site_values
        where = f"{site['caller']}:{site['line']}"
        scope: dict[str, Any] = {"__name__": "__autograd_fix_call_site__", "__builtins__": builtins}
        try:
            exec(compile(site.get("program") or "", f"<recipe of the call at {where}>", "exec"), scope)  # noqa: S102
            values = {name: eval(text, scope) for name, text in site["arguments"].items()}  # noqa: S307
        except Exception as exc:  # noqa: BLE001 - the project's code: any failure means "synthesize"
            self.described["call site"] = f"the call at {where} could not be rebuilt ({type(exc).__name__}: {exc}); inputs synthesized"
            return self._site_values
        self._site_values = values
        return values

    def _site_value(self, name: str, value: Any) -> Any:
        site = self.call_site or {}
        if isinstance(value, nn.Module):
            value = value.to(self.device)
            if self._model is None:
                self._model = value
        elif isinstance(value, torch.Tensor):
            value = value.to(self.device)
            if self.tensors_require_grad and value.is_floating_point() and not value.requires_grad:
                value = value.detach().requires_grad_(True)
        self.described[name] = f"`{site['arguments'][name]}` from the call at {site['caller']}:{site['line']}: {_summary(value)}"
        return value

    def _from_factory(self, name: str) -> Any:
        spec = self.factories[name]
        module_name, _, attr = spec.partition(":")
        if self.factory_root and self.factory_root not in sys.path:
            sys.path.insert(0, self.factory_root)
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except Exception as exc:  # noqa: BLE001
            raise Unbindable(name, f"factory {spec} could not be imported: {type(exc).__name__}: {exc}") from exc
        kwargs = {}
        for param in inspect.signature(factory).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            if param.name in self.values or param.name in self.factories or param.default is inspect.Parameter.empty:
                kwargs[param.name] = self.value(param.name, param.annotation)
        try:
            value = factory(**kwargs)
        except Exception as exc:  # noqa: BLE001
            raise Unbindable(name, f"factory {spec} raised {type(exc).__name__}: {exc}") from exc
        if isinstance(value, nn.Module) and self._model is None:
            self._model = value
        self.described[name] = f"factory {spec}"
        return value


def _summary(value: Any) -> str:
    """A short description of a bound value: a module's class, a tensor's shape, a
    dict's keys with their shapes."""
    if isinstance(value, nn.Module):
        return f"{type(value).__name__}()"
    if isinstance(value, torch.Tensor):
        return f"tensor {list(value.shape)}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_summary(v)}" for k, v in list(value.items())[:6]) + "}"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__} of {len(value)}: " + ", ".join(_summary(v) for v in value[:4])
    return type(value).__name__
