"""DeepCTR-Torch basemodel.py fit(), minimized: total_loss.backward(retain_graph=True)
although nothing backpropagates through that graph again.

Report: "Why enable retain_graph in backward? Does the model need backward twice?";
"retain_graph=True can be removed" (shenweichen/DeepCTR-Torch#69).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class BaseModel(nn.Module):
    def __init__(self, n_features=8, l2_reg_embedding=1e-3):
        super().__init__()
        self.embedding = nn.Linear(n_features, 4, bias=False)
        self.out = nn.Linear(4, 1)
        self.l2_reg_embedding = l2_reg_embedding

    def forward(self, x):
        return torch.sigmoid(self.out(F.relu(self.embedding(x))))

    def get_regularization_loss(self):
        return self.l2_reg_embedding * self.embedding.weight.pow(2).sum()

    def fit(self, x, y, batch_size=4, epochs=2):
        optim = torch.optim.Adagrad(self.parameters(), lr=0.05)
        for epoch in range(epochs):
            for start in range(0, x.size(0), batch_size):
                x_batch, y_batch = x[start : start + batch_size], y[start : start + batch_size]
                y_pred = self(x_batch).squeeze()
                optim.zero_grad()
                loss = F.binary_cross_entropy(y_pred, y_batch.squeeze(), reduction="sum")
                reg_loss = self.get_regularization_loss()
                total_loss = loss + reg_loss
                total_loss.backward()
                optim.step()
            print(f"epoch {epoch}: loss {total_loss.item():.4f}")


if __name__ == "__main__":
    model = BaseModel()
    model.fit(torch.randn(12, 8), torch.randint(0, 2, (12, 1)).float())
