"""torch_geometric nn/nlp/llm.py, minimized: the LLM wrapper builds its autocast
context with the deprecated torch.cuda.amp.autocast.

Report: "[FutureWarning] Addressing the warning related to use of a deprecated
function: self.autocast_context = torch.cuda.amp.autocast(dtype=dtype)"
(pyg-team/pytorch_geometric#9674).
"""
import torch
from torch import nn


class LLM(nn.Module):
    def __init__(self, vocab_size=40, hidden=16, dtype=torch.bfloat16):
        super().__init__()
        self.word_embedding = nn.Embedding(vocab_size, hidden)
        self.llm = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, vocab_size))
        self.autocast_context = torch.cuda.amp.autocast(dtype=dtype)

    def forward(self, input_ids, labels):
        with self.autocast_context:
            logits = self.llm(self.word_embedding(input_ids))
        return nn.functional.cross_entropy(logits.float().flatten(0, 1), labels.flatten())
