"""One epoch of causal-LM fine-tuning, in the shape of the Hugging Face Trainer's loop:
`model(**inputs)` with a dict batch (input_ids, attention_mask, labels), the loss read
from the output object, and a running `tr_loss` for the log line. The sum adds the loss
tensor itself, so every batch's graph stays alive until the epoch ends (the report: RAM
grew every step until it ran out after about 20,000 steps).

Library code: the project's own `finetune.py` calls it; nothing here runs it.
"""

import torch


def train_epoch(model, batches, optimizer, grad_accum=1):
    model.train()
    tr_loss = torch.tensor(0.0)
    for step, batch in enumerate(batches):
        outputs = model(**batch)
        loss = outputs.loss / grad_accum
        loss.backward()
        if (step + 1) % grad_accum == 0:
            optimizer.step()
            optimizer.zero_grad()
        tr_loss += loss.item()
    return tr_loss / len(batches)
