"""neural-network-lyapunov train_lyapunov.py, minimized: the training routine
returns the list of loss tensors, each still holding its graph.

Report: "Fix the memory leak when calling line search sd for training Lyapunov:
closure should return only loss, and losses list only stores the float value, not
the tensor" (StanfordASL/neural-network-lyapunov#140).
"""
import torch
from torch import nn


def lyapunov_derivative_loss(relu, x_samples, x_equilibrium, margin=0.1):
    v = relu(x_samples) - relu(x_equilibrium)
    v_dot = (relu(x_samples * 0.9) - relu(x_samples)).squeeze(-1)
    return torch.relu(v_dot + margin * v.squeeze(-1)).mean()


def train_lyapunov(relu, x_samples, x_equilibrium, learning_rate=1e-3, max_iterations=5):
    optimizer = torch.optim.SGD(relu.parameters(), lr=learning_rate)
    losses = []
    for it in range(max_iterations):
        optimizer.zero_grad()
        loss = lyapunov_derivative_loss(relu, x_samples, x_equilibrium)
        loss.backward()
        optimizer.step()
        losses.append(loss)
    return losses
