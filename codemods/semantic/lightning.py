"""PyTorch Lightning's own grad mode: the hooks its evaluation loops run with grad off.

Lightning's trainer runs `validation_step`, `test_step`, `predict_step` (and every
`on_validation*`, `on_test*`, `on_predict*` callback hook) of a LightningModule or a
Callback under `no_grad` / `inference_mode` itself, so a forward there builds no graph
whatever the code says.
"""

from __future__ import annotations

import libcst as cst

from autograd_fix.codemods.imports import ImportIndex

#: the hooks Lightning runs with grad disabled (besides the `on_validation*` family)
LIGHTNING_HOOKS = frozenset(
    {"validation_step", "test_step", "predict_step", "validation_epoch_end", "test_epoch_end"}
)
#: the packages whose classes Lightning's loops drive
_LIGHTNING_PACKAGES = ("pytorch_lightning.", "lightning.", "lightning_fabric.")


def is_lightning_class(node: cst.ClassDef, imports: ImportIndex) -> bool:
    """A LightningModule, a Lightning Callback, or Lightning's own base classes."""
    if node.name.value.endswith("LightningModule"):
        return True
    for base in node.bases:
        qualified = imports.qualified_name(base.value) or ""
        if qualified.endswith("LightningModule") or qualified.startswith(_LIGHTNING_PACKAGES):
            return True
    return False


def is_lightning_hook(name: str) -> bool:
    """A method Lightning runs with grad disabled."""
    return name in LIGHTNING_HOOKS or name.startswith(("on_validation", "on_test", "on_predict"))
