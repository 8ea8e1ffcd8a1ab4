"""VALID / INVALID examples of `agf014_checkpoint_without_use_reentrant` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. explicit non-reentrant
    valid(
        """
from torch.utils.checkpoint import checkpoint

def forward(self, x):
    return checkpoint(self.block, x, use_reentrant=False)
"""
    ),
    # 2. explicit reentrant: the author chose it
    valid(
        """
import torch.utils.checkpoint

def forward(self, x):
    return torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=True)
"""
    ),
    # 3. a user function named checkpoint (saving a model)
    valid(
        """
import torch

def checkpoint(model, path):
    torch.save(model.state_dict(), path)

checkpoint(model, "last.pt")
"""
    ),
    # 4. DeepSpeed's activation checkpointing: not torch.utils.checkpoint
    valid(
        """
import torch
import deepspeed

def forward(self, x):
    return deepspeed.checkpointing.checkpoint(self.block, x)
"""
    ),
    # 5. keyword arguments forwarded: use_reentrant may be in there
    valid(
        """
from torch.utils.checkpoint import checkpoint

def run(fn, *args, **ckpt_kwargs):
    return checkpoint(fn, *args, **ckpt_kwargs)
"""
    ),
    # 6. the function referenced, not called
    valid(
        """
from torch.utils.checkpoint import checkpoint

ckpt_fn = checkpoint if use_ckpt else None
"""
    ),
    # 7. Lightning's callback named ModelCheckpoint
    valid(
        """
from lightning.pytorch.callbacks import ModelCheckpoint

ckpt = ModelCheckpoint(dirpath="out")
"""
    ),
    # 8. checkpoint_sequential with the argument
    valid(
        """
from torch.utils.checkpoint import checkpoint_sequential

def forward(self, x):
    return checkpoint_sequential(self.layers, 2, x, use_reentrant=False)
"""
    ),
]

INVALID = [
    # 1. TorchFix's fixture
    invalid(
        """
import torch
from torch.utils.checkpoint import checkpoint
def gn(x, y):
    return torch.sigmoid(torch.matmul(x, y))
def fn(x, y):
    return checkpoint(gn, torch.sin(x), y)
""",
        """
import torch
from torch.utils.checkpoint import checkpoint
def gn(x, y):
    return torch.sigmoid(torch.matmul(x, y))
def fn(x, y):
    return checkpoint(gn, torch.sin(x), y, use_reentrant=False)
""",
    ),
    # 2. the dotted spelling in a transformer block
    invalid(
        """
import torch.utils.checkpoint

class Encoder(torch.nn.Module):
    def forward(self, hidden):
        for layer in self.layers:
            hidden = torch.utils.checkpoint.checkpoint(layer, hidden)
        return hidden
""",
        """
import torch.utils.checkpoint

class Encoder(torch.nn.Module):
    def forward(self, hidden):
        for layer in self.layers:
            hidden = torch.utils.checkpoint.checkpoint(layer, hidden, use_reentrant=False)
        return hidden
""",
    ),
    # 3. an alias of the module
    invalid(
        """
import torch.utils.checkpoint as cp

def forward(self, x):
    return cp.checkpoint(self.block, x)
""",
        """
import torch.utils.checkpoint as cp

def forward(self, x):
    return cp.checkpoint(self.block, x, use_reentrant=False)
""",
    ),
    # 4. a multi-line call with a trailing comma keeps its layout
    invalid(
        """
from torch.utils.checkpoint import checkpoint

def forward(self, x, mask):
    return checkpoint(
        self.attention,
        x,
        mask,
    )
""",
        """
from torch.utils.checkpoint import checkpoint

def forward(self, x, mask):
    return checkpoint(
        self.attention,
        x,
        mask,
        use_reentrant=False,
    )
""",
    ),
    # 5. other keywords kept
    invalid(
        """
from torch.utils.checkpoint import checkpoint

def forward(self, x):
    return checkpoint(self.block, x, preserve_rng_state=False)
""",
        """
from torch.utils.checkpoint import checkpoint

def forward(self, x):
    return checkpoint(self.block, x, preserve_rng_state=False, use_reentrant=False)
""",
    ),
    # 6. checkpoint_sequential
    invalid(
        """
from torch.utils.checkpoint import checkpoint_sequential

def forward(self, x):
    return checkpoint_sequential(self.layers, 2, x)
""",
        """
from torch.utils.checkpoint import checkpoint_sequential

def forward(self, x):
    return checkpoint_sequential(self.layers, 2, x, use_reentrant=False)
""",
    ),
    # 7. renamed import, positional *args
    invalid(
        """
from torch.utils.checkpoint import checkpoint as ckpt

def forward(self, *inputs):
    return ckpt(self.block, *inputs)
""",
        """
from torch.utils.checkpoint import checkpoint as ckpt

def forward(self, *inputs):
    return ckpt(self.block, *inputs, use_reentrant=False)
""",
    ),
    # 8. a lambda wrapped block, nested in an expression
    invalid(
        """
import torch
from torch.utils.checkpoint import checkpoint

def forward(self, x):
    return x + checkpoint(lambda t: self.ff(self.norm(t)), x)
""",
        """
import torch
from torch.utils.checkpoint import checkpoint

def forward(self, x):
    return x + checkpoint(lambda t: self.ff(self.norm(t)), x, use_reentrant=False)
""",
    ),
]
