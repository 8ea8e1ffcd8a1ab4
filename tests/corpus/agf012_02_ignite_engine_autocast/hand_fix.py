from typing import Any, Callable, Optional

import torch
import torch.nn as nn


def supervised_training_step_amp(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable,
    device: Optional[str] = None,
    scaler: Optional["torch.amp.GradScaler"] = None,
    gradient_accumulation_steps: int = 1,
) -> Callable:
    def update(iteration: int, batch: Any) -> float:
        if (iteration - 1) % gradient_accumulation_steps == 0:
            optimizer.zero_grad()
        model.train()
        x, y = batch
        with torch.amp.autocast("cuda", enabled=True):
            y_pred = model(x)
            loss = loss_fn(y_pred, y)
            if gradient_accumulation_steps > 1:
                loss = loss / gradient_accumulation_steps
        if scaler:
            scaler.scale(loss).backward()
            if iteration % gradient_accumulation_steps == 0:
                scaler.step(optimizer)
                scaler.update()
        else:
            loss.backward()
            if iteration % gradient_accumulation_steps == 0:
                optimizer.step()
        return loss.item()

    return update


if __name__ == "__main__":
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    update = supervised_training_step_amp(model, optimizer, nn.MSELoss())
    data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)]
    for iteration, batch in enumerate(data, start=1):
        print(f"{iteration} loss={update(iteration, batch):.4f}")
