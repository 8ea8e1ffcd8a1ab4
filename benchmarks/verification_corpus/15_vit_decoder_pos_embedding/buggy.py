"""enhancing-transformers layers.py, minimized: ViTDecoder adds its position
embedding in place to the incoming tokens, which the caller may still need.

Report: "An inplace operation in the forward process" of ViTDecoder, raising
"...modified by an inplace operation" when two decoders share the input
(thuanz123/enhancing-transformers#11); suggested fix
`token = token + self.de_pos_embedding`.
"""
import torch
from torch import nn


class ViTDecoder(nn.Module):
    def __init__(self, num_tokens=4, dim=8, patch_dim=6):
        super().__init__()
        self.de_pos_embedding = nn.Parameter(torch.randn(1, num_tokens, dim) * 0.02)
        self.transformer = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU())
        self.to_pixel = nn.Linear(dim, patch_dim)

    def forward(self, token):
        token += self.de_pos_embedding
        x = self.transformer(token)
        return self.to_pixel(x)
