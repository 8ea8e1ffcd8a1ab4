"""SAELens sparse_autoencoder.py, minimized: the decoder is renormalized and its
gradient projected through .data.

Report: "Question about use of .data in SparseAutoencoder class ... reading and
writing from .data in pytorch is deprecated and potentially dangerous"; "now we use
@torch.no_grad everywhere" (decoderesearch/SAELens#49).
"""
import torch
from torch import nn


class SparseAutoencoder(nn.Module):
    def __init__(self, d_in=6, d_sae=12):
        super().__init__()
        self.W_enc = nn.Parameter(torch.randn(d_in, d_sae) * 0.1)
        self.b_enc = nn.Parameter(torch.zeros(d_sae))
        self.W_dec = nn.Parameter(torch.randn(d_sae, d_in) * 0.1)
        self.b_dec = nn.Parameter(torch.zeros(d_in))

    def forward(self, x):
        feature_acts = torch.relu((x - self.b_dec) @ self.W_enc + self.b_enc)
        sae_out = feature_acts @ self.W_dec + self.b_dec
        mse_loss = (sae_out - x).pow(2).mean()
        return sae_out, feature_acts, mse_loss + 1e-3 * feature_acts.abs().sum(-1).mean()

    def set_decoder_norm_to_unit_norm(self):
        with torch.no_grad():
            self.W_dec /= torch.norm(self.W_dec, dim=1, keepdim=True)
