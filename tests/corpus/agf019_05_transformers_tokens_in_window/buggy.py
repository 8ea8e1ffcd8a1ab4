import torch
import torch.nn as nn
import torch.nn.functional as F

IGNORE_INDEX = -100
vocab_size = 12


class TinyCausalLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, 16)
        self.lm_head = nn.Linear(16, vocab_size)

    def forward(self, input_ids):
        return self.lm_head(torch.tanh(self.embed(input_ids)))


def make_batch(length):
    input_ids = torch.randint(0, vocab_size, (2, length))
    labels = input_ids.clone()
    labels[:, : length // 2] = IGNORE_INDEX  # prompt tokens are not trained on
    return {"input_ids": input_ids, "labels": labels}


def train(model, batches, gradient_accumulation_steps):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    num_items_in_batch = None
    for step, batch in enumerate(batches):
        if step % gradient_accumulation_steps == 0:
            # the loss is normalised by the tokens of the whole accumulation window, not of the micro-batch
            window = batches[step : step + gradient_accumulation_steps]
            num_items_in_batch = sum(int((b["labels"] != IGNORE_INDEX).sum()) for b in window)
        logits = model(batch["input_ids"])
        loss = F.cross_entropy(
            logits.view(-1, vocab_size), batch["labels"].view(-1), ignore_index=IGNORE_INDEX, reduction="sum"
        ) / num_items_in_batch
        loss.backward()
        if (step + 1) % gradient_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
            print(f"step {step}: tokens in window {num_items_in_batch}")
    return model


if __name__ == "__main__":
    lengths = [6, 10, 4, 8, 12, 6]
    model = train(TinyCausalLM(), [make_batch(n) for n in lengths], gradient_accumulation_steps=3)
    print(f"lm_head norm {model.lm_head.weight.norm().item():.4f}")
