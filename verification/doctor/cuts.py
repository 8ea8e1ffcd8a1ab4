"""Where a run builds a tensor with no history (AGF008's site): the constructors people
use to "fix" an error about a missing ``grad_fn``.

``torch.tensor(...)`` and ``Variable(...)`` are wrapped (once, at install; a call costs
one Python frame, no tensor op is watched). A call under grad mode is a *cut* when

* its data carries a graph (a tensor that requires grad, or a list or tuple holding one):
  the copy has no history, so whatever produced the data gets no gradient; or
* it asks for ``requires_grad=True`` on a fresh leaf at the same line in two or more
  calls (a leaf re-made every iteration: a loss or an activation re-wrapped, not a
  parameter made once at set-up).

Cuts are only evidence: `findings` names them as AGF008's site when the run also has
parameters that took part in a forward and never received a gradient.

``torch.utils.checkpoint.checkpoint`` is wrapped too: a reentrant checkpoint (the
default) of a module with trainable parameters, none of whose inputs requires grad,
returns an output with no graph; that call is AGF014's site (those parameters are never
trained, and never ran under grad mode, so the parameter scan cannot see them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

Site = tuple[str, int]

#: a list or tuple is looked into this many elements deep (a list of stage losses)
_LOOK = 64


def _carries_graph(data: Any, depth: int = 0) -> bool:
    if isinstance(data, torch.Tensor):
        return data.requires_grad
    if depth < 2 and isinstance(data, (list, tuple)):
        return any(_carries_graph(item, depth + 1) for item in data[:_LOOK])
    return False


@dataclass
class GraphCuts:
    """Counts of cuts per call site; `site` names the innermost project frame, `quiet`
    says when the doctor's own probes are running (not the user's code)."""

    site: Callable[[int], "Site | None"]
    quiet: Callable[[], bool]
    copies: dict[Site, int] = field(default_factory=dict)
    fresh_leaves: dict[Site, int] = field(default_factory=dict)
    #: reentrant checkpoints whose output came back with no graph (AGF014)
    reentrant: dict[Site, int] = field(default_factory=dict)

    def _note_checkpoint(self, function: Any, args: tuple[Any, ...], use_reentrant: Any, out: Any,
                         ran: list[torch.nn.Module]) -> None:
        """A reentrant checkpoint under grad mode whose function ran modules with
        parameters that require grad, none of whose tensor inputs requires grad, and
        whose output has no graph: those parameters get no gradient from it."""
        if use_reentrant is False or self.quiet() or not torch.is_grad_enabled():
            return
        owner = function if isinstance(function, torch.nn.Module) else getattr(function, "__self__", None)
        modules = [owner] if isinstance(owner, torch.nn.Module) else list(ran)
        if not any(p.requires_grad for module in modules for p in module.parameters()):
            return
        inputs = [a for a in args if isinstance(a, torch.Tensor)]
        outputs = [out] if isinstance(out, torch.Tensor) else [t for t in (out if isinstance(out, (list, tuple)) else ()) if isinstance(t, torch.Tensor)]
        if any(t.requires_grad for t in inputs) or not outputs or any(t.requires_grad for t in outputs):
            return
        where = self.site(3)
        if where is not None:
            self.reentrant[where] = self.reentrant.get(where, 0) + 1

    def _note(self, data: Any, requires_grad: Any) -> None:
        if self.quiet() or not torch.is_grad_enabled():
            return
        carried = _carries_graph(data)
        if not carried and requires_grad is not True:
            return
        where = self.site(3)
        if where is None:
            return
        table = self.copies if carried else self.fresh_leaves
        table[where] = table.get(where, 0) + 1

    def install(self) -> list[Callable[[], None]]:
        """Wrap the constructors; the undo callables of what was replaced."""
        import torch.autograd as autograd
        import torch.autograd.variable as variable_module

        original_tensor = torch.tensor
        cuts = self

        def tensor(data: Any, *args: Any, **kwargs: Any) -> torch.Tensor:
            cuts._note(data, kwargs.get("requires_grad"))
            return original_tensor(data, *args, **kwargs)

        original_variable = variable_module.Variable

        class _WatchedMeta(type(original_variable)):  # type: ignore[misc]
            """`Variable(...)` noted, then made by the real class; `isinstance(x,
            Variable)` stays what it was (the real metaclass's check: any tensor)."""

            def __call__(cls, *args: Any, **kwargs: Any) -> Any:
                requires_grad = kwargs.get("requires_grad", args[1] if len(args) > 1 else None)
                cuts._note(args[0] if args else None, requires_grad)
                return original_variable(*args, **kwargs)

        watched = _WatchedMeta("Variable", (), {"__doc__": original_variable.__doc__, "__module__": "torch.autograd.variable"})
        torch.tensor = tensor  # type: ignore[assignment]
        autograd.Variable = watched  # type: ignore[attr-defined]
        variable_module.Variable = watched  # type: ignore[misc]
        import torch.utils.checkpoint as checkpoint_module

        original_checkpoint = checkpoint_module.checkpoint

        def checkpoint(function: Any, *args: Any, use_reentrant: Any = None, **kwargs: Any) -> Any:
            ran: list[torch.nn.Module] = []  # the modules the checkpointed function ran (a lambda's too)
            handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda module, _: ran.append(module))
            try:
                out = original_checkpoint(function, *args, use_reentrant=use_reentrant, **kwargs)
            finally:
                handle.remove()
            cuts._note_checkpoint(function, args, use_reentrant, out, ran)
            return out

        checkpoint_module.checkpoint = checkpoint  # type: ignore[assignment]

        def undo() -> None:
            torch.tensor = original_tensor  # type: ignore[assignment]
            autograd.Variable = original_variable  # type: ignore[attr-defined]
            variable_module.Variable = original_variable  # type: ignore[misc]
            checkpoint_module.checkpoint = original_checkpoint  # type: ignore[assignment]

        return [undo]

    def record(self) -> list[dict[str, Any]]:
        """The cuts: copies of graph-carrying data, and leaves re-made at one line."""
        found = [{"file": k[0], "line": k[1], "calls": v, "kind": "copy"} for k, v in self.copies.items()]
        found += [{"file": k[0], "line": k[1], "calls": v, "kind": "fresh_leaf"} for k, v in self.fresh_leaves.items()
                  if v >= 2 and k not in self.copies]
        found += [{"file": k[0], "line": k[1], "calls": v, "kind": "reentrant"} for k, v in self.reentrant.items()]
        return found
