import time

import torch
import torch.nn as nn


class SimpleTrainer:
    def __init__(self, model, data_loader, optimizer, zero_grad_before_forward=False):
        model.train()
        self.model = model
        self.data_loader = data_loader
        self._data_loader_iter = iter(data_loader)
        self.optimizer = optimizer
        self.zero_grad_before_forward = zero_grad_before_forward
        self.iter = 0


class AMPTrainer(SimpleTrainer):
    """
    Like :class:`SimpleTrainer`, but uses PyTorch's native automatic mixed precision
    in the training loop.
    """

    def __init__(self, model, data_loader, optimizer, grad_scaler=None, precision=torch.float16):
        super().__init__(model, data_loader, optimizer)
        if grad_scaler is None:
            from torch.cuda.amp import GradScaler

            grad_scaler = GradScaler()
        self.grad_scaler = grad_scaler
        self.precision = precision

    def run_step(self):
        """
        Implement the AMP training logic.
        """
        assert self.model.training, "[AMPTrainer] model was changed to eval mode!"
        from torch.cuda.amp import autocast

        start = time.perf_counter()
        data = next(self._data_loader_iter)
        data_time = time.perf_counter() - start

        if self.zero_grad_before_forward:
            self.optimizer.zero_grad()
        with autocast(dtype=self.precision):
            loss_dict = self.model(data)
            if isinstance(loss_dict, torch.Tensor):
                losses = loss_dict
                loss_dict = {"total_loss": loss_dict}
            else:
                losses = sum(loss_dict.values())

        if not self.zero_grad_before_forward:
            self.optimizer.zero_grad()
        self.grad_scaler.scale(losses).backward()

        self.grad_scaler.step(self.optimizer)
        self.grad_scaler.update()
        self.iter += 1
        return {k: v.item() for k, v in loss_dict.items()}, data_time


class TinyDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(6, 8)
        self.cls = nn.Linear(8, 3)
        self.box = nn.Linear(8, 4)

    def forward(self, batched_inputs):
        feats = torch.relu(self.backbone(batched_inputs["image"]))
        return {
            "loss_cls": nn.functional.cross_entropy(self.cls(feats), batched_inputs["labels"]),
            "loss_box_reg": nn.functional.smooth_l1_loss(self.box(feats), batched_inputs["boxes"]),
        }


if __name__ == "__main__":
    model = TinyDetector()
    data = [{"image": torch.randn(4, 6), "labels": torch.randint(0, 3, (4,)), "boxes": torch.rand(4, 4)} for _ in range(3)]
    trainer = AMPTrainer(model, data, torch.optim.SGD(model.parameters(), lr=0.05))
    for _ in range(3):
        losses, _ = trainer.run_step()
        print(trainer.iter, {k: round(v, 4) for k, v in losses.items()})
