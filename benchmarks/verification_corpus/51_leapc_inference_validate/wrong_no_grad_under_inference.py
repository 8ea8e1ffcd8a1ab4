"""A trainer's evaluation helpers: `rollout_value` already runs under the project's own
`inference` decorator (it enters `torch.inference_mode()`), while `validation_loss`
runs with gradients on and keeps every batch's output."""

import functools

import torch
import torch.nn.functional as F


def inference(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with torch.inference_mode():
            return fn(*args, **kwargs)

    return wrapper


@inference
def rollout_value(model, loader):
    model.eval()
    values = []
    with torch.no_grad():
        for obs, _ in loader:
            values.append(model(obs).mean(-1))
    return torch.cat(values)


def validation_loss(model, loader):
    model.eval()
    losses = []
    for obs, target in loader:
        losses.append(F.mse_loss(model(obs), target))
    return torch.stack(losses).mean()
