"""toward-controlled-generation-of-text-pytorch, minimized: every loss is
backpropagated with retain_graph=True, the last one included, so the graph of
each step is kept alive.

Report: "Memory blow up when setting retain_graph = True ... we only need
retain_graph = True before last time backwards"
(GBLin5566/toward-controlled-generation-of-text-pytorch#9).
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class SentenceVAE(nn.Module):
    def __init__(self, vocab=20, hidden=16, latent=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.encoder = nn.GRU(hidden, hidden, batch_first=True)
        self.to_mu = nn.Linear(hidden, latent)
        self.to_logvar = nn.Linear(hidden, latent)
        self.decoder = nn.Linear(latent, vocab)

    def forward(self, tokens):
        _, h = self.encoder(self.embed(tokens))
        mu, logvar = self.to_mu(h[-1]), self.to_logvar(h[-1])
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return self.decoder(z), mu, logvar


model = SentenceVAE()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(4):
    tokens = torch.randint(0, 20, (3, 5))
    logits, mu, logvar = model(tokens)
    rec_loss = nn.functional.cross_entropy(logits, tokens[:, 0])
    kl_loss = -0.5 * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())
    optimizer.zero_grad()
    rec_loss.backward()
    kl_loss.backward()
    optimizer.step()
    print(step, rec_loss.item(), kl_loss.item())
