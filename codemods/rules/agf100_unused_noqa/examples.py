"""VALID / INVALID examples of `agf100_unused_noqa` (read by the docs and the parametrized tests).

The example tests run each rule alone, so every other autograd-fix code is "not
enabled" here; what a code that another rule uses looks like is in
`tests/test_unused_noqa.py`.
"""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. no noqa at all
    valid(
        """
import torch
x = torch.ones(3, requires_grad=True)
"""
    ),
    # 2. a bare noqa: another linter may need it
    valid(
        """
import torch
from torch import *  # noqa
"""
    ),
    # 3. another tool's codes
    valid(
        """
import torch
import numpy as np  # noqa: F401
"""
    ),
    # 4. several codes of other tools
    valid(
        """
import torch
very_long_name = torch.zeros(3)  # noqa: E501, W291
"""
    ),
    # 5. the text of a noqa inside a string is no comment
    valid(
        """
import torch
HINT = "add '# noqa: AGF001' to silence it"
"""
    ),
    # 6. a suppression of this rule itself is never judged by it
    valid(
        """
import torch
y = torch.ones(2)  # noqa: AGF100
"""
    ),
    # 7. a code without digits is no code
    valid(
        """
import torch
z = torch.ones(2)  # noqa: AGF
"""
    ),
    # 8. a file-level directive is not a line's noqa
    valid(
        """
# autograd-fix: noqa: AGF001
import torch
w = torch.ones(2)
"""
    ),
    # 9. noqa words in prose
    valid(
        """
import torch
# We used to need noqa comments here; AGF001 no longer fires.
v = torch.ones(2)
"""
    ),
]

INVALID = [
    # 1. the whole comment goes
    invalid(
        """
import torch
x = torch.ones(3)  # noqa: AGF001
""",
        """
import torch
x = torch.ones(3)
""",
    ),
    # 2. several of our codes, all unused
    invalid(
        """
import torch
x = torch.ones(3)  # noqa: AGF001, AGF009
""",
        """
import torch
x = torch.ones(3)
""",
    ),
    # 3. another tool's code stays
    invalid(
        """
import torch
import numpy as np  # noqa: AGF001, F401
""",
        """
import torch
import numpy as np  # noqa: F401
""",
    ),
    # 4. the comment before the noqa stays
    invalid(
        """
import torch
y = torch.zeros(2)  # the buffer  # noqa: AGF003
""",
        """
import torch
y = torch.zeros(2)  # the buffer
""",
    ),
    # 5. a code no rule has
    invalid(
        """
import torch
z = torch.ones(1)  # noqa: AGF999
""",
        """
import torch
z = torch.ones(1)
""",
    ),
    # 6. no space after the colon
    invalid(
        """
import torch
z = torch.ones(1)  # noqa:AGF002
""",
        """
import torch
z = torch.ones(1)
""",
    ),
    # 7. on a def line
    invalid(
        """
import torch

def evaluate(model, batch):  # noqa: AGF001
    return model(batch).argmax(1)
""",
        """
import torch

def evaluate(model, batch):
    return model(batch).argmax(1)
""",
    ),
    # 8. upper case NOQA, on a loop header
    invalid(
        """
import torch
for p in model.parameters():  # NOQA: AGF013
    p.requires_grad = False
""",
        """
import torch
for p in model.parameters():
    p.requires_grad = False
""",
    ),
    # 9. a comment line of its own goes with its line
    invalid(
        """
import torch

def step(optimizer):
    # noqa: AGF002
    optimizer.step()
""",
        """
import torch

def step(optimizer):
    optimizer.step()
""",
    ),
    # 10. lower case codes
    invalid(
        """
import torch
b = torch.ones(1)  # noqa: agf009
""",
        """
import torch
b = torch.ones(1)
""",
    ),
]
