"""VALID / INVALID examples of `agf016_imprecise_log_exp` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. Python floats: math.log, never torch
    valid(
        """
import torch
import math
rate = math.log(1 + growth)
"""
    ),
    # 2. NumPy arrays
    valid(
        """
import torch
import numpy as np
y = np.log(1 + x)
z = np.exp(x) - 1
"""
    ),
    # 3. not one: log(2 + x)
    valid(
        """
import torch
y = torch.log(2 + x)
"""
    ),
    # 4. TorchFix's "not logsumexp": something added inside the log or the sum
    valid(
        """
import torch
y = torch.log(torch.sum(torch.exp(x), 1, keepdim=True) + 2.5)
y = torch.log(torch.sum(torch.exp(x) + 2.5, 1))
y = torch.sum(torch.log(torch.exp(x)), 1)
"""
    ),
    # 5. log-sum-exp over every element: no dim (logsumexp needs one)
    valid(
        """
import torch
y = torch.log(torch.sum(torch.exp(x), None, keepdim=True))
y = torch.log(torch.sum(torch.exp(x), dim=None, keepdim=True))
y = torch.log(torch.sum(torch.exp(x)))
"""
    ),
    # 6. the sum asks for another dtype
    valid(
        """
import torch
y = torch.log(torch.sum(torch.exp(x), dim=1, dtype=torch.float64))
"""
    ),
    # 7. a tensor one (could broadcast or promote), and a constant expression
    valid(
        """
import torch
one = torch.ones(4, 1)
y = torch.log(one + x)
z = torch.log(1 + 2)
"""
    ),
    # 8. a user function called log
    valid(
        """
import torch
def log(v):
    print(v)

log(1 + step)
"""
    ),
    # 9. exp on the right, and the method spelling (TorchFix does not match them either)
    valid(
        """
import torch
x = -1 + torch.exp(a)
x = a.exp() - 1
"""
    ),
]

INVALID = [
    # 1. TorchFix's log1p fixture
    invalid(
        """
import torch
a = torch.randn(5)
b = torch.log(1 + a)
c = torch.log(a + 1.0)
""",
        """
import torch
a = torch.randn(5)
b = torch.log1p(a)
c = torch.log1p(a)
""",
    ),
    # 2. expm1 in an expression
    invalid(
        """
import torch
ret = (torch.exp(a) - 1) * torch.exp(2 * b)
""",
        """
import torch
ret = torch.expm1(a) * torch.exp(2 * b)
""",
    ),
    # 3. logsumexp with keepdim
    invalid(
        """
import torch
y = torch.log(torch.sum(torch.exp(x), 1, keepdim=True))
""",
        """
import torch
y = torch.logsumexp(x, 1, keepdim=True)
""",
    ),
    # 4. logsumexp of an expression, dim by keyword
    invalid(
        """
import torch
y = torch.log(torch.sum(torch.exp(2.5 + x), dim=1))
""",
        """
import torch
y = torch.logsumexp(2.5 + x, dim=1)
""",
    ),
    # 5. aliased import: softplus written by hand
    invalid(
        """
import torch as T

def softplus(x):
    return T.log(1 + T.exp(x))
""",
        """
import torch as T

def softplus(x):
    return T.log1p(T.exp(x))
""",
    ),
    # 6. from-import spelling: the rewrite adds no import, it uses `torch` if imported
    invalid(
        """
import torch
from torch import exp
delta = exp(log_scale) - 1.0
""",
        """
import torch
delta = torch.expm1(log_scale)
""",
    ),
    # 7. a log-likelihood in a loss function
    invalid(
        """
import torch

def nll(logits, target):
    log_z = torch.log(torch.sum(torch.exp(logits), dim=-1))
    return (log_z - logits.gather(-1, target[:, None]).squeeze(-1)).mean()
""",
        """
import torch

def nll(logits, target):
    log_z = torch.logsumexp(logits, dim=-1)
    return (log_z - logits.gather(-1, target[:, None]).squeeze(-1)).mean()
""",
    ),
    # 8. no torch import binding `torch` itself: the rewrite imports it
    invalid(
        """
from torch import log

def entropy_bonus(p):
    return log(1 + p).mean()
""",
        """
import torch

def entropy_bonus(p):
    return torch.log1p(p).mean()
""",
    ),
]
