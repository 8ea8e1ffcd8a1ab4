"""Train a small classifier and report the epoch's mean loss.

Bug (AGF006): `epoch_loss += loss` adds tensors that still carry their autograd graph,
so the running total keeps a graph reaching back through every iteration of the epoch,
and `losses.append(loss)` keeps every iteration's graph node alive in a list.
Run it: `python examples/loss_accumulated_with_graph.py`.
"""

import torch
from torch import nn


def count_graph_nodes(tensors):
    """Autograd nodes still reachable from `tensors` (what the accumulation keeps alive)."""
    seen, stack = set(), [t.grad_fn for t in tensors if torch.is_tensor(t) and t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return len(seen)


def train_epoch(model, batches, optimizer, criterion):
    epoch_loss = 0.0
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        epoch_loss += loss
        losses.append(loss)
    print(f"mean loss {epoch_loss / len(batches):.4f}")
    return losses


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
    batches = [(torch.randn(16, 8), torch.randint(0, 3, (16,))) for _ in range(50)]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = train_epoch(model, batches, optimizer, nn.CrossEntropyLoss())
    print(f"graph nodes kept alive by the loss list: {count_graph_nodes(losses)}")
