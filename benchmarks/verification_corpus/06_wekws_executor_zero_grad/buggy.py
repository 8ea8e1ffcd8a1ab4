"""wekws kws/utils/executor.py, minimized: Executor.train never zeroes gradients.

Report: "optimizer.step() is called, optimizer.zero_grad() is not" (wenet-e2e/wekws#73;
the review asked for zero_grad above loss.backward()).
"""
import torch
from torch import nn

torch.manual_seed(0)


class KWSModel(nn.Module):
    def __init__(self, idim=10, hdim=16, odim=2):
        super().__init__()
        self.backbone = nn.GRU(idim, hdim, batch_first=True)
        self.classifier = nn.Linear(hdim, odim)

    def forward(self, feats):
        out, _ = self.backbone(feats)
        return self.classifier(out[:, -1])


class Executor:
    def __init__(self):
        self.step = 0

    def train(self, model, optimizer, data_loader, args):
        model.train()
        clip = args.get("grad_clip", 50.0)
        for batch_idx, (feats, target) in enumerate(data_loader):
            logits = model(feats)
            loss = nn.functional.cross_entropy(logits, target)
            loss.backward()
            grad_norm = nn.utils.clip_grad_norm_(model.parameters(), clip)
            if torch.isfinite(grad_norm):
                optimizer.step()
            self.step += 1


if __name__ == "__main__":
    model = KWSModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = [(torch.randn(4, 8, 10), torch.randint(0, 2, (4,))) for _ in range(5)]
    executor = Executor()
    for epoch in range(2):
        executor.train(model, optimizer, loader, {"grad_clip": 5.0})
    print("steps", executor.step, "weight sum", model.classifier.weight.sum().item())
