import torch
import torch.nn as nn


class SoftMaskedBert(nn.Module):
    def __init__(self, vocab_size=40, hidden=16):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, hidden)
        self.detector = nn.GRU(hidden, hidden // 2, batch_first=True, bidirectional=True)
        self.detector_head = nn.Linear(hidden, 1)
        self.mask_embedding = nn.Parameter(torch.zeros(hidden))
        self.corrector = nn.Linear(hidden, vocab_size)

    def forward(self, input_ids):
        e = self.embedding(input_ids)
        p, _ = self.detector(e)
        prob = torch.sigmoid(self.detector_head(p))
        e_ = prob * self.mask_embedding + (1 - prob) * e
        out = torch.log_softmax(self.corrector(e_ + e), dim=-1)
        return out, prob


class SoftMaskedBertTrainer:
    def __init__(self, model, gama=0.8, lr=2e-5):
        self.model = model
        self.gama = gama
        self.optim = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.criterion_c = nn.NLLLoss()
        self.criterion_d = nn.BCELoss()

    def train(self, train_data, epoch):
        self.model.train()
        avg_loss = 0.0
        for i, data in enumerate(train_data):
            out, prob = self.model(data["input_ids"])
            prob = prob.reshape(-1, prob.shape[1])
            loss_d = self.criterion_d(prob, data["label"].float())
            loss_c = self.criterion_c(out.transpose(1, 2), data["output_ids"])
            loss = self.gama * loss_c + (1 - self.gama) * loss_d

            self.optim.zero_grad()
            loss.backward()
            self.optim.step()

            avg_loss += loss.item()
        print("EP%d_train, avg_loss=%.4f" % (epoch, avg_loss / len(train_data)))


if __name__ == "__main__":
    trainer = SoftMaskedBertTrainer(SoftMaskedBert(), lr=1e-2)
    data = [
        {"input_ids": torch.randint(0, 40, (2, 6)), "output_ids": torch.randint(0, 40, (2, 6)), "label": torch.randint(0, 2, (2, 6))}
        for _ in range(4)
    ]
    for epoch in range(2):
        trainer.train(data, epoch)
