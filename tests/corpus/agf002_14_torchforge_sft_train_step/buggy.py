import torch
from torch import nn


class OptimizersContainer:
    """Stand-in for torchtitan's OptimizersContainer: one optimizer per model part, stepped together."""

    def __init__(self, model_parts, lr):
        self.optimizers = [torch.optim.AdamW(m.parameters(), lr=lr) for m in model_parts]

    def step(self):
        for optimizer in self.optimizers:
            optimizer.step()

    def zero_grad(self):
        for optimizer in self.optimizers:
            optimizer.zero_grad()


class LRSchedulersContainer:
    def __init__(self, optimizers, warmup_steps):
        self.schedulers = [torch.optim.lr_scheduler.LambdaLR(o, lambda s: min(1.0, (s + 1) / warmup_steps)) for o in optimizers.optimizers]

    def step(self):
        for scheduler in self.schedulers:
            scheduler.step()


class ForgeSFTRecipe:
    def __init__(self, num_training_steps=6, vocab=32, dim=16):
        self.model_parts = [nn.Sequential(nn.Embedding(vocab, dim), nn.Linear(dim, vocab))]
        self.optimizers = OptimizersContainer(self.model_parts, lr=1e-2)
        self.lr_schedulers = LRSchedulersContainer(self.optimizers, warmup_steps=2)
        self.loss_fn = nn.CrossEntropyLoss()
        self.current_step = 0
        self.num_training_steps = num_training_steps
        tokens = torch.randint(0, vocab, (num_training_steps, 4, 9))
        self.train_dataloader = [{"tokens": t[:, :-1], "labels": t[:, 1:]} for t in tokens]

    def forward_backward(self, input_dict, labels, do_backward=True):
        model_parts = self.model_parts
        inputs = input_dict["tokens"]
        # Non-PP forward / backward
        assert len(model_parts) == 1
        pred = model_parts[0](inputs)
        loss = self.loss_fn(pred.flatten(0, 1), labels.flatten())
        # need to free to before bwd to avoid peaking memory
        del pred
        if do_backward:
            loss.backward()

        return loss

    def train_step(self, batch) -> None:
        labels = batch.pop("labels")
        loss = self.forward_backward(batch, labels)
        print(f"{self.current_step}|Loss: {loss.item():.4f}")

        self.optimizers.step()
        self.lr_schedulers.step()

    def train(self) -> None:
        dataloader = iter(self.train_dataloader)
        self.optimizers.zero_grad()

        while self.current_step < self.num_training_steps:
            batch = next(dataloader)
            self.train_step(batch)
            self.current_step += 1


if __name__ == "__main__":
    recipe = ForgeSFTRecipe()
    recipe.train()
