"""facebookarchive/loop train.py, minimized: evaluate() builds graphs it never uses.

Report: "Out of memory in validation step", a sharp jump in GPU memory during
evaluation (facebookarchive/loop#57).
"""
import torch
from torch import nn

torch.manual_seed(0)


class Loop(nn.Module):
    def __init__(self, n_in=6, n_out=4):
        super().__init__()
        self.encoder = nn.Linear(n_in, 16)
        self.decoder = nn.GRUCell(16, 16)
        self.out = nn.Linear(16, n_out)

    def forward(self, x):
        h = torch.zeros(x.size(0), 16)
        outputs = []
        for t in range(x.size(1)):
            h = self.decoder(torch.tanh(self.encoder(x[:, t])), h)
            outputs.append(self.out(h))
        return torch.stack(outputs, 1)


def train(model, criterion, optimizer, loader):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()


def evaluate(model, criterion, epoch, eval_losses, loader):
    total = 0.0
    model.eval()
    with torch.no_grad():
        for x, y in loader:
            output = model(x)
            loss = criterion(output, y)
        total = loss.item()
    eval_losses.append(total / len(loader))
    return eval_losses


def main():
    model = Loop()
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = [(torch.randn(3, 5, 6), torch.randn(3, 5, 4)) for _ in range(5)]
    eval_losses = []
    for epoch in range(2):
        train(model, criterion, optimizer, loader[:3])
        evaluate(model, criterion, epoch, eval_losses, loader[3:])
    best = torch.tensor(eval_losses).min().item()
    print(f"eval losses {eval_losses}, best {best:.4f}")


if __name__ == "__main__":
    main()
