"""nanoGPT train.py, minimized: the deprecated torch.cuda.amp.GradScaler.

Report: "FutureWarning: torch.cuda.amp.GradScaler(args...) is deprecated. Please use
torch.amp.GradScaler('cuda', args...) instead" (karpathy/nanoGPT#635; PR #709).
"""
from contextlib import nullcontext

import torch
import torch.nn as nn

torch.manual_seed(1337)
device = "cpu"
dtype = "float32"
device_type = "cuda" if "cuda" in device else "cpu"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=ptdtype)


class TinyGPT(nn.Module):
    def __init__(self, vocab_size=32, n_embd=16, block_size=8):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.mlp = nn.Sequential(nn.LayerNorm(n_embd), nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx, targets):
        pos = torch.arange(idx.size(1))
        x = self.wte(idx) + self.wpe(pos)
        logits = self.lm_head(x + self.mlp(x))
        return logits, nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


model = TinyGPT()
scaler = torch.amp.GradScaler("cuda", enabled=(dtype == "float16"))
optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4)
data = torch.randint(0, 32, (64,))
for iter_num in range(4):
    ix = torch.randint(len(data) - 9, (4,))
    X = torch.stack([data[i : i + 8] for i in ix])
    Y = torch.stack([data[i + 1 : i + 9] for i in ix])
    with ctx:
        logits, loss = model(X, Y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    print(f"iter {iter_num}: loss {loss.item():.4f}")
