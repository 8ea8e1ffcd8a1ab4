import time
from types import SimpleNamespace

import torch
import torch.nn as nn
from torch.cuda.amp import GradScaler


def cosine_lr(optimizer, base_lr, warmup_length, steps):
    def _lr_adjuster(step):
        lr = base_lr * min(1.0, (step + 1) / max(warmup_length, 1))
        for group in optimizer.param_groups:
            group["lr"] = lr
        return lr

    return _lr_adjuster


class ImageClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.image_encoder = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 32), nn.GELU())
        self.classification_head = nn.Linear(32, 10)

    def forward(self, inputs):
        return self.classification_head(self.image_encoder(inputs))


def finetune(args, data_loader):
    model = ImageClassifier()
    num_batches = len(data_loader)
    loss_fn = torch.nn.CrossEntropyLoss()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=args.wd)
    scheduler = cosine_lr(optimizer, args.lr, args.warmup_length, args.epochs * num_batches // args.num_grad_accumulation)
    scaler = GradScaler(enabled=False)
    for epoch in range(args.epochs):
        model.train()
        for i, batch in enumerate(data_loader):
            start_time = time.time()
            step = i // args.num_grad_accumulation + epoch * num_batches // args.num_grad_accumulation
            inputs, labels = batch
            logits = model(inputs)
            loss = loss_fn(logits, labels)
            # Scale the loss
            loss = loss / args.num_grad_accumulation

            scaler.scale(loss).backward()

            if (i + 1) % args.num_grad_accumulation == 0:
                scheduler(step)

                torch.nn.utils.clip_grad_norm_(params, 1.0)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()

            if step % args.print_every == 0 and (i + 1) % args.num_grad_accumulation == 0:
                print(f"Train Epoch: {epoch} [{i}/{num_batches}]\tLoss: {loss.item():.6f}")
    return model


if __name__ == "__main__":
    args = SimpleNamespace(lr=1e-3, wd=0.1, warmup_length=2, epochs=2, num_grad_accumulation=2, print_every=1)
    loader = [(torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))) for _ in range(4)]
    model = finetune(args, loader)
    print(f"head norm {model.classification_head.weight.norm().item():.4f}")
