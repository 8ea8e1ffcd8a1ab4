"""The project's own training script in the shape of RecBole's "customize training"
usage: it builds the config, the data and a BPR model, constructs the `Trainer` and
drives the epochs itself (evaluating between them). No `__main__`: a launcher imports
and calls `run_custom`."""

import torch
from torch import nn

from buggy import Trainer


class BPR(nn.Module):
    def __init__(self, config, n_users, n_items):
        super().__init__()
        self.user_embedding = nn.Embedding(n_users, config["embedding_size"])
        self.item_embedding = nn.Embedding(n_items, config["embedding_size"])

    def calculate_loss(self, interaction):
        user = self.user_embedding(interaction["user_id"])
        pos_score = (user * self.item_embedding(interaction["item_id"])).sum(-1)
        neg_score = (user * self.item_embedding(interaction["neg_item_id"])).sum(-1)
        return -torch.log(1e-10 + torch.sigmoid(pos_score - neg_score)).mean()


def make_train_data(n_users, n_items, batches, batch_size, seed=2020):
    generator = torch.Generator().manual_seed(seed)
    return [
        {
            "user_id": torch.randint(0, n_users, (batch_size,), generator=generator),
            "item_id": torch.randint(0, n_items, (batch_size,), generator=generator),
            "neg_item_id": torch.randint(0, n_items, (batch_size,), generator=generator),
        }
        for _ in range(batches)
    ]


def run_custom():
    config = {"learner": "adam", "learning_rate": 0.01, "epochs": 3, "device": torch.device("cpu"),
              "embedding_size": 16, "n_users": 40, "n_items": 60}
    train_data = make_train_data(config["n_users"], config["n_items"], batches=5, batch_size=32)
    model = BPR(config, config["n_users"], config["n_items"]).to(config["device"])
    trainer = Trainer(config, model)
    for epoch_idx in range(config["epochs"]):
        train_loss = trainer._train_epoch(train_data, epoch_idx)
        print(f"epoch {epoch_idx} training [train loss: {train_loss:.4f}]")
