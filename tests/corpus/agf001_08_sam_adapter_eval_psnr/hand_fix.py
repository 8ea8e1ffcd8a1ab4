import torch
import torch.nn as nn


class Averager:
    def __init__(self):
        self.n = 0.0
        self.v = 0.0

    def add(self, v, n=1.0):
        self.v = (self.v * self.n + v * n) / (self.n + n)
        self.n += n

    def item(self):
        return self.v


def calc_f1(y_pred, y_true):
    pred = (y_pred > 0.5).float()
    tp = (pred * y_true).sum()
    return (2 * tp / (pred.sum() + y_true.sum() + 1e-8)).item(), 0.0, 0.0, 0.0


class SAM(nn.Module):
    def __init__(self):
        super().__init__()
        self.image_encoder = nn.Conv2d(3, 8, 3, padding=1)
        self.mask_decoder = nn.Conv2d(8, 1, 1)

    def infer(self, input):
        return self.mask_decoder(torch.relu(self.image_encoder(input)))


def eval_psnr(loader, model, eval_type=None):
    model.eval()

    if eval_type == "f1":
        metric_fn = calc_f1
        metric1, metric2, metric3, metric4 = "f1", "auc", "none", "none"

    val_metric1 = Averager()
    val_metric2 = Averager()

    for batch in loader:
        for k, v in batch.items():
            batch[k] = v

        inp = batch["inp"]

        with torch.no_grad():
            pred = torch.sigmoid(model.infer(inp))

        result1, result2, result3, result4 = metric_fn(pred, batch["gt"])
        val_metric1.add(result1, inp.shape[0])
        val_metric2.add(result2, inp.shape[0])

    return val_metric1.item(), val_metric2.item(), metric1, metric2


if __name__ == "__main__":
    model = SAM()
    loader = [{"inp": torch.randn(2, 3, 8, 8), "gt": (torch.rand(2, 1, 8, 8) > 0.5).float()} for _ in range(3)]
    result1, result2, metric1, metric2 = eval_psnr(loader, model, eval_type="f1")
    print(f"{metric1}={result1:.4f} {metric2}={result2:.4f}")
