import time

import numpy as np
import torch
import torch.nn as nn


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def generate_data(b):
    return (torch.randn(b, 3, 16, 16).to(torch.float32), torch.randint(10, (b,)))


def init_model():
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))


def evaluate(mod, inp):
    with torch.no_grad():
        return mod(inp)


model = init_model()
inp = generate_data(16)[0]
eager_times = []
for i in range(3):
    out, eager_time = timed(lambda: evaluate(model, inp))
    eager_times.append(eager_time)
print("eager eval: runs", len(eager_times), "median > 0:", np.median(eager_times) > 0)
print("output sum", round(out.sum().item(), 4), "requires_grad", out.requires_grad)
