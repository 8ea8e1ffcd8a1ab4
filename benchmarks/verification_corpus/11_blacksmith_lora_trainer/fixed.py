"""tt-blacksmith LoRA Trainer, minimized: training_step never zeroes the optimizer.

Report: "[Trainer] Fix Bug Where Zero Grad was Left Out" (tenstorrent/tt-blacksmith#711:
"we forgot to do zero_grad on optimizer after each optimizer step").
"""
import torch
from torch import nn


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank: int = 2, alpha: float = 4.0):
        super().__init__()
        self.base = base
        self.base.weight.requires_grad_(False)
        self.lora_a = nn.Parameter(torch.randn(rank, base.in_features) * 0.1)
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank))
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + (x @ self.lora_a.t() @ self.lora_b.t()) * self.scale


class Trainer:
    def __init__(self, model, lr=1e-2):
        self.model = model
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=lr)
        self.loss_fn = nn.CrossEntropyLoss()

    def training_step(self, batch):
        inputs, labels = batch
        logits = self.model(inputs)
        loss = self.loss_fn(logits, labels)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        return loss.detach()

    def fit(self, batches):
        return [self.training_step(batch).item() for batch in batches]
