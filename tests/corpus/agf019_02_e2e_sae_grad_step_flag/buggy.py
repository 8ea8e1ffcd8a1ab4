import torch
import torch.nn as nn


class SAE(nn.Module):
    def __init__(self, d_in=8, n_dict=16):
        super().__init__()
        self.encoder = nn.Linear(d_in, n_dict)
        self.decoder = nn.Linear(n_dict, d_in)

    def forward(self, x):
        c = torch.relu(self.encoder(x))
        return self.decoder(c), c


def calc_loss(orig_acts, new_acts, c, sparsity_coeff=1e-3):
    loss_dict = {"in_to_orig": ((new_acts - orig_acts) ** 2).mean(), "sparsity": c.abs().mean()}
    loss = loss_dict["in_to_orig"] + sparsity_coeff * loss_dict["sparsity"]
    return loss, loss_dict


def train(config, model, train_loader):
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    effective_batch_size = config["effective_batch_size"] or config["batch_size"]
    n_gradient_accumulation_steps = effective_batch_size // config["batch_size"]
    grad_updates = 0
    for batch_idx, tokens in enumerate(train_loader):
        is_grad_step = (batch_idx + 1) % n_gradient_accumulation_steps == 0
        new_acts, c = model(tokens)
        loss, loss_dict = calc_loss(tokens, new_acts, c)
        loss.backward()

        if is_grad_step:
            if config["max_grad_norm"] is not None:
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config["max_grad_norm"]).item()
                print(f"grad norm before clipping {grad_norm:.4f}")
            optimizer.step()
            optimizer.zero_grad()
            grad_updates += 1
    return grad_updates


if __name__ == "__main__":
    config = {"lr": 1e-2, "batch_size": 4, "effective_batch_size": 12, "max_grad_norm": 10.0}
    loader = [torch.randn(4, 8) for _ in range(6)]
    sae = SAE()
    print("grad updates", train(config, sae, loader))
    print(f"decoder norm {sae.decoder.weight.norm().item():.4f}")
