"""VALID / INVALID examples of `agf017_anomaly_mode_or_empty_cache_in_training` (read by the docs and the parametrized tests)."""

from autograd_fix.codemods.model import invalid, valid

VALID = [
    # 1. anomaly mode behind a debug flag
    valid(
        """
import torch
torch.autograd.set_detect_anomaly(args.debug)
for x, y in loader:
    criterion(model(x), y).backward()
    optimizer.step()
"""
    ),
    # 2. anomaly mode under an if
    valid(
        """
import torch
if args.detect_anomaly:
    torch.autograd.set_detect_anomaly(True)
for x, y in loader:
    criterion(model(x), y).backward()
"""
    ),
    # 3. turned off explicitly
    valid(
        """
import torch
torch.autograd.set_detect_anomaly(False)
for x, y in loader:
    criterion(model(x), y).backward()
"""
    ),
    # 4. empty_cache once per epoch, after the batch loop
    valid(
        """
import torch
for epoch in range(epochs):
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
    torch.cuda.empty_cache()
"""
    ),
    # 5. empty_cache every N steps
    valid(
        """
import torch
for step, (x, y) in enumerate(loader):
    criterion(model(x), y).backward()
    optimizer.step()
    if step % 100 == 0:
        torch.cuda.empty_cache()
"""
    ),
    # 6. empty_cache in an evaluation loop (no backward)
    valid(
        """
import torch
with torch.no_grad():
    for x, y in val_loader:
        preds.append(model(x))
        torch.cuda.empty_cache()
"""
    ),
    # 7. a user function called empty_cache
    valid(
        """
import torch
from mycache import empty_cache
for x, y in loader:
    criterion(model(x), y).backward()
    empty_cache()
"""
    ),
    # 8. detect_anomaly around a single debugging backward, outside any loop
    valid(
        """
import torch
with torch.autograd.detect_anomaly():
    loss = criterion(model(x), y)
    loss.backward()
"""
    ),
    # 9. anomaly mode in a script without training
    valid(
        """
import torch
torch.autograd.set_detect_anomaly(True)
out = model(x)
print(out.shape)
"""
    ),
]

INVALID = [
    # 1. anomaly mode left on at the top of a training script
    invalid(
        """
import torch
torch.autograd.set_detect_anomaly(True)
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
""",
        """
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
""",
    ),
    # 2. empty_cache on every batch
    invalid(
        """
import torch
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    torch.cuda.empty_cache()
""",
        """
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
""",
    ),
    # 3. detect_anomaly around the whole loop: unwrapped
    invalid(
        """
import torch

def train(model, loader, optimizer):
    with torch.autograd.detect_anomaly():
        for x, y in loader:
            optimizer.zero_grad()
            model(x).sub(y).pow(2).mean().backward()
            optimizer.step()
""",
        """
def train(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        model(x).sub(y).pow(2).mean().backward()
        optimizer.step()
""",
    ),
    # 4. detect_anomaly around each step, inside the loop
    invalid(
        """
from torch import autograd

for x, y in loader:
    with autograd.detect_anomaly():
        loss = criterion(model(x), y)
        loss.backward()
    optimizer.step()
""",
        """
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
""",
    ),
    # 5. keyword spelling, inside a trainer function
    invalid(
        """
import torch

def fit(model, loader, opt):
    torch.autograd.set_detect_anomaly(mode=True)
    for batch in loader:
        opt.zero_grad()
        model(batch).mean().backward()
        opt.step()
""",
        """
def fit(model, loader, opt):
    for batch in loader:
        opt.zero_grad()
        model(batch).mean().backward()
        opt.step()
""",
    ),
    # 6. empty_cache before the forward pass, `del` kept
    invalid(
        """
import torch
for images, labels in train_loader:
    torch.cuda.empty_cache()
    outputs = model(images)
    loss = criterion(outputs, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    del outputs, loss
""",
        """
for images, labels in train_loader:
    outputs = model(images)
    loss = criterion(outputs, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    del outputs, loss
""",
    ),
    # 7. with other context managers in the same statement: reported, not fixed
    invalid(
        """
import torch
for x, y in loader:
    with torch.autograd.detect_anomaly(), torch.autocast("cuda"):
        loss = criterion(model(x), y)
    loss.backward()
"""
    ),
    # 8. the only statement of a block besides nothing else: reported, not fixed
    invalid(
        """
import torch
for x, y in loader:
    model(x).sum().backward()
    with torch.no_grad():
        torch.cuda.empty_cache()
""",
        None,
    ),
]
