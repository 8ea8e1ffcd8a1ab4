import torch
import torch.nn as nn


class Evaluator:
    def eval(self, out, batch, prev_metrics=None):
        metrics = dict(prev_metrics or {})
        mae = (out["energy"] - batch["y"]).abs().mean().item()
        total, numel = metrics.get("energy_mae", (0.0, 0))
        metrics["energy_mae"] = (total + mae, numel + 1)
        return metrics


class SchNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Linear(4, 16)
        self.energy_head = nn.Linear(16, 1)

    def forward(self, batch):
        return self.energy_head(torch.tanh(self.embedding(batch["pos"]))).sum(1).squeeze(-1)


class ForcesTrainer:
    def __init__(self, model, val_loader):
        self.model = model
        self.val_loader = val_loader
        self.evaluator = Evaluator()
        self.loss_fn = nn.L1Loss()

    def _forward(self, batch_list):
        return {"energy": self.model(batch_list)}

    def _compute_loss(self, out, batch_list):
        return self.loss_fn(out["energy"], batch_list["y"])

    def validate(self, split="val", epoch=None):
        print("### Evaluating on {}.".format(split))
        self.model.eval()
        metrics = {}
        loader = self.val_loader
        for i, batch in enumerate(loader):
            # Forward.
            out = self._forward(batch)
            loss = self._compute_loss(out, batch)
            # Compute metrics.
            metrics = self.evaluator.eval(out, batch, metrics)
            metrics["loss"] = metrics.get("loss", 0.0) + loss.item()
        log_dict = {k: v[0] / v[1] for k, v in metrics.items() if isinstance(v, tuple)}
        log_dict["loss"] = metrics["loss"] / len(loader)
        return log_dict


if __name__ == "__main__":
    loader = [{"pos": torch.randn(3, 5, 4), "y": torch.randn(3)} for _ in range(4)]
    trainer = ForcesTrainer(SchNet(), loader)
    print({k: round(v, 4) for k, v in trainer.validate().items()})
