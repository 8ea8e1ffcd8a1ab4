"""A mixed-precision training loop written against the pre-2.4 / 0.3-era APIs.

Bug (AGF012): `torch.cpu.amp.autocast`, `torch.cuda.amp.GradScaler` warn on every call
(FutureWarning since PyTorch 2.4, slated for removal) and `Variable(x)` has been a no-op
wrapper since 0.4 that in fact returns `x.detach()`.
Run it: `python -W error::FutureWarning examples/deprecated_autograd_api.py` (fails) or
plainly (prints the warnings). Inside this repository (`torch>=2.1`) the GradScaler is
left as it is (`torch.amp.GradScaler` needs 2.3); `--target-torch 2.4` rewrites it too.
"""

import torch
from torch import nn
from torch.autograd import Variable


def make_batches(count, batch_size=32, features=16, classes=3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(batch_size, features, generator=generator), torch.randint(0, classes, (batch_size,), generator=generator))
        for _ in range(count)
    ]


def train(model, train_loader, lr=0.05):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    criterion = nn.CrossEntropyLoss()
    # disabled when CUDA is missing: scale() and step() then pass through
    scaler = torch.cuda.amp.GradScaler(enabled=torch.cuda.is_available())
    for step, (inputs, labels) in enumerate(train_loader):
        inputs = Variable(inputs)
        labels = Variable(labels)
        optimizer.zero_grad()
        with torch.cpu.amp.autocast(dtype=torch.bfloat16):
            loss = criterion(model(inputs), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if step % 5 == 0:
            print(f"step {step}: loss {loss.item():.3f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    train(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 3)), make_batches(15))
