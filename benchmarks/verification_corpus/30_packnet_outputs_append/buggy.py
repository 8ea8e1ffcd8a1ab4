"""packnet-sfm horovod_trainer.py, minimized: every batch's output dict, loss tensor
included, is appended to the epoch's outputs list.

Report: "About memory leaks ... outputs hold the output['loss'] in the all epoch";
fix "Detach loss before appending it to the training output list"
(TRI-ML/packnet-sfm#47, PR #51).
"""
import torch
from torch import nn

torch.manual_seed(0)


class DepthNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1))

    def training_step(self, batch):
        depth = self.net(batch["rgb"])
        loss = nn.functional.smooth_l1_loss(depth, batch["depth"])
        return {"loss": loss, "metrics": {"depth_mean": depth.mean().item()}}

    def training_epoch_end(self, outputs):
        avg_train_loss = torch.stack([output["loss"] for output in outputs]).mean()
        return {"avg_train-loss": avg_train_loss.item()}


class HorovodTrainer:
    def train(self, dataloader, module, optimizer):
        module.train()
        outputs = []
        for i, batch in enumerate(dataloader):
            optimizer.zero_grad()
            output = module.training_step(batch)
            output["loss"].backward()
            optimizer.step()
            outputs.append(output)
        return module.training_epoch_end(outputs)


if __name__ == "__main__":
    loader = [{"rgb": torch.randn(2, 3, 8, 8), "depth": torch.rand(2, 1, 8, 8)} for _ in range(4)]
    model = DepthNet()
    trainer = HorovodTrainer()
    print(trainer.train(loader, model, torch.optim.Adam(model.parameters(), lr=1e-3)))
