"""A validation pass that was fixed, its suppression left behind.

The forward once ran with autograd on and `# noqa: AGF001` silenced the report; the
loop then moved under `torch.no_grad()`, and the comment stayed (a stale noqa, as in
langchain-ai/langgraph#8546).
"""
import torch
import torch.nn as nn


@torch.no_grad()
def validate(model, batches):
    model.eval()
    total = 0.0
    for x, y in batches:
        total += nn.functional.mse_loss(model(x), y).item() + 0.01 * model(x).abs().mean().item()
    return total / len(batches)


if __name__ == "__main__":
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    data = [(torch.randn(16, 4), torch.randn(16, 1)) for _ in range(4)]
    print(f"validation loss {validate(net, data):.5f}")
