import torch
import torch.nn as nn


class SimpleFeatureNet(nn.Module):
    def __init__(self, in_dim=3, out_dim=8):
        super().__init__()
        self.block = nn.Sequential(nn.Linear(in_dim, 16), nn.ReLU(), nn.Linear(16, out_dim))

    def forward(self, x):
        return nn.functional.normalize(self.block(x), dim=1)


class ContrastiveLossTrainer:
    def __init__(self, model, val_data_loader):
        self.model = model
        self.val_data_loader = val_data_loader
        self.pos_thresh = 0.1

    def _valid_epoch(self):
        self.model.eval()
        num_data = 0
        hit_ratio = 0.0
        feat_match_dists = []
        for input_dict in self.val_data_loader:
            F0 = self.model(input_dict["sinput0"])
            F1 = self.model(input_dict["sinput1"])
            dist = (F0 - F1).pow(2).sum(1).sqrt()
            feat_match_dists.append(dist)
            hit_ratio += (dist < self.pos_thresh).float().mean().item()
            num_data += 1
        mean_dist = torch.cat(feat_match_dists).mean()
        return {"hit_ratio": hit_ratio / num_data, "feat_match_dist": mean_dist.item()}


if __name__ == "__main__":
    torch.manual_seed(0)
    points = torch.randn(64, 3)
    loader = [{"sinput0": points[i : i + 16], "sinput1": points[i : i + 16] + 0.01 * torch.randn(16, 3)} for i in range(0, 64, 16)]
    trainer = ContrastiveLossTrainer(SimpleFeatureNet(), loader)
    stats = trainer._valid_epoch()
    print(f"hit_ratio={stats['hit_ratio']:.4f} dist={stats['feat_match_dist']:.4f}")
