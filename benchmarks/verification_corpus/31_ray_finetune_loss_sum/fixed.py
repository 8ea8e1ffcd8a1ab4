"""ray's finetune_hf_llm.py template, minimized: loss_sum += loss keeps every
micro-step's graph until the epoch's mean is logged.

Report: "Make sure that loss can be freed after every iteration" (ray-project/ray#40940;
the review weighs loss.detach() against .item()).
"""
import torch
from torch import nn

torch.manual_seed(0)


class TinyLM(nn.Module):
    def __init__(self, vocab=30, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, input_ids, labels):
        logits = self.head(self.embed(input_ids))
        return nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())


def training_function(config):
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"])
    batches = [(torch.randint(0, 30, (2, 6)), torch.randint(0, 30, (2, 6))) for _ in range(5)]
    for epoch in range(config["num_epochs"]):
        loss_sum = 0.0
        for step, (input_ids, labels) in enumerate(batches):
            loss = model(input_ids, labels)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            loss_sum += loss.detach()
        aggregated_loss = loss_sum / (step + 1)
        print(f"epoch {epoch}: loss {aggregated_loss.item():.4f}")


if __name__ == "__main__":
    training_function({"lr": 1e-3, "num_epochs": 2})
