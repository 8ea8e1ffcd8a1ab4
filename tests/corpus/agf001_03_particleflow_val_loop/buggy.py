import torch
import torch.nn as nn


class MLPF(nn.Module):
    def __init__(self, input_dim=6, num_classes=4):
        super().__init__()
        self.nn_id = nn.Sequential(nn.Linear(input_dim, 32), nn.ELU(), nn.Linear(32, num_classes))
        self.nn_pt = nn.Sequential(nn.Linear(input_dim, 32), nn.ELU(), nn.Linear(32, 1))

    def forward(self, X, mask):
        return self.nn_id(X) * mask.unsqueeze(-1), self.nn_pt(X) * mask.unsqueeze(-1)


def mlpf_loss(ygen, ypred):
    loss_id = nn.functional.cross_entropy(ypred[0].flatten(0, 1), ygen["cls_id"].flatten())
    loss_pt = nn.functional.mse_loss(ypred[1].squeeze(-1), ygen["pt"])
    return {"Total": loss_id + loss_pt, "Classification": loss_id, "Regression": loss_pt}


def train_and_valid(rank, model, optimizer, data_loader, is_train):
    if is_train:
        model.train()
    else:
        model.eval()

    epoch_loss = {}
    for itrain, batch in enumerate(data_loader):
        X, ygen, mask = batch
        if is_train:
            ypred = model(X, mask)
            loss = mlpf_loss(ygen, ypred)
            for param in model.parameters():
                param.grad = None
            loss["Total"].backward()
            optimizer.step()
        else:
            ypred = model(X, mask)
            loss = mlpf_loss(ygen, ypred)

        for loss_ in loss.keys():
            if loss_ not in epoch_loss:
                epoch_loss[loss_] = 0.0
            epoch_loss[loss_] += loss[loss_].detach()

    for loss_ in epoch_loss:
        epoch_loss[loss_] = epoch_loss[loss_].cpu().item() / len(data_loader)
    return epoch_loss


if __name__ == "__main__":
    model = MLPF()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = [
        (torch.randn(2, 10, 6), {"cls_id": torch.randint(0, 4, (2, 10)), "pt": torch.rand(2, 10)}, torch.ones(2, 10))
        for _ in range(4)
    ]
    train_loss = train_and_valid(0, model, optimizer, batches[:3], True)
    valid_loss = train_and_valid(0, model, optimizer, batches[3:], False)
    print(f"train={train_loss['Total']:.4f} valid={valid_loss['Total']:.4f}")
