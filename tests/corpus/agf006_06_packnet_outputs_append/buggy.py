import torch
import torch.nn as nn


class SfmModelWrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.depth_net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 1, 1))

    def training_step(self, batch, *args):
        inv_depth = self.depth_net(batch["rgb"])
        loss = (inv_depth - batch["depth"]).abs().mean()
        return {"loss": loss, "metrics": {"abs_rel": loss.item()}}

    def training_epoch_end(self, output_batch):
        loss = sum(output["loss"] for output in output_batch) / len(output_batch)
        return {"avg_train-loss": float(loss)}


class HorovodTrainer:
    def train(self, dataloader, module, optimizer):
        # Set module to train
        module.train()
        # Start outputs
        outputs = []
        # For all batches
        for i, batch in enumerate(dataloader):
            # Reset optimizer
            optimizer.zero_grad()
            # Send samples to GPU and take a training step
            output = module.training_step(batch, i)
            # Backprop through loss and take an optimizer step
            output["loss"].backward()
            optimizer.step()
            # Append output to list of outputs
            outputs.append(output)
        # Return outputs for epoch end
        return module.training_epoch_end(outputs)


if __name__ == "__main__":
    module = SfmModelWrapper()
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
    loader = [{"rgb": torch.randn(2, 3, 8, 8), "depth": torch.rand(2, 1, 8, 8)} for _ in range(4)]
    for epoch in range(2):
        print(epoch, {k: round(v, 4) for k, v in HorovodTrainer().train(loader, module, optimizer).items()})
