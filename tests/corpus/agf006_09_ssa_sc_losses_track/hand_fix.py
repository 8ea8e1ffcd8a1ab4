import torch
import torch.nn as nn
import torch.nn.functional as F


class LossesTrackEpoch:
    def __init__(self, num_iterations):
        self.validation_losses = {}
        self.train_losses = {}
        self.train_iteration_counts = 0
        self.validation_iteration_counts = 0

    def set_validation_losses(self, keys):
        for key in keys:
            self.validation_losses[key] = 0

    def set_train_losses(self, keys):
        for key in keys:
            self.train_losses[key] = 0

    def update_train_losses(self, loss):
        for key in loss:
            self.train_losses[key] += loss[key].item()
        self.train_iteration_counts += 1

    def restart_train_losses(self):
        for key in self.train_losses.keys():
            self.train_losses[key] = 0
        self.train_iteration_counts = 0


class LMSCNet(nn.Module):
    def __init__(self, class_num=3):
        super().__init__()
        self.conv = nn.Conv2d(4, class_num, 3, padding=1)

    def forward(self, x):
        return {"pred_semantic_1_1": self.conv(x["3D_OCCUPANCY"])}

    def compute_loss(self, scores, data):
        loss_1_1 = F.cross_entropy(scores["pred_semantic_1_1"], data["3D_LABEL"])
        loss_reg = 1e-4 * sum(p.pow(2).sum() for p in self.parameters())
        return {"total": loss_1_1 + loss_reg, "semantic_1_1": loss_1_1}

    def get_train_loss_keys(self):
        return ["total", "semantic_1_1"]


def train(model, optimizer, dset, losses_track, start_epoch=1, nbr_epochs=2):
    for epoch in range(start_epoch, nbr_epochs + 1):
        model.train()
        losses_track.restart_train_losses()
        for t, data in enumerate(dset):
            scores = model(data)
            loss = model.compute_loss(scores, data)
            optimizer.zero_grad()
            loss["total"].backward()
            optimizer.step()
            # Updating batch losses to then get mean for epoch loss
            losses_track.update_train_losses(loss)
        epoch_loss = losses_track.train_losses["total"] / losses_track.train_iteration_counts
        print("=> [Epoch {} - Total Train Loss = {:.4f}]".format(epoch, float(epoch_loss)))


if __name__ == "__main__":
    model = LMSCNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    dset = [{"3D_OCCUPANCY": torch.randn(2, 4, 8, 8), "3D_LABEL": torch.randint(0, 3, (2, 8, 8))} for _ in range(4)]
    losses_track = LossesTrackEpoch(len(dset))
    losses_track.set_train_losses(model.get_train_loss_keys())
    train(model, optimizer, dset, losses_track)
