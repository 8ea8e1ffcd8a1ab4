import torch
import torch.nn as nn


class Transformer(nn.Module):
    def __init__(self, dim_in=6, vocab=12):
        super().__init__()
        self.encoder = nn.Linear(dim_in, 16)
        self.decoder = nn.Linear(16, vocab)

    def forward(self, src, src_lengths, tgt, verbose=False):
        pred = self.decoder(torch.relu(self.encoder(src)))
        gold = tgt
        hyp_seq = pred.argmax(-1)
        return pred, gold, hyp_seq, gold


def calculate_metrics(pred, gold, smoothing=0.0):
    loss = nn.functional.cross_entropy(pred.flatten(0, 1), gold.flatten(), label_smoothing=smoothing)
    num_correct = (pred.argmax(-1) == gold).sum().item()
    return loss, num_correct


class Trainer:
    def train(self, model, train_loader, valid_loader_list, opt, smoothing, num_epochs=2):
        for epoch in range(num_epochs):
            total_loss = 0
            model.train()
            for i, (src, tgt, src_percentages, src_lengths, tgt_lengths) in enumerate(train_loader):
                opt.zero_grad()
                pred, gold, hyp_seq, gold_seq = model(src, src_lengths, tgt, verbose=False)
                loss, num_correct = calculate_metrics(pred, gold, smoothing=smoothing)
                loss.backward()
                opt.step()
                total_loss += loss.item()
            print("(Epoch {}) TRAIN LOSS:{:.4f}".format(epoch + 1, total_loss / len(train_loader)))

            # evaluate
            model.eval()
            for ind in range(len(valid_loader_list)):
                valid_loader = valid_loader_list[ind]
                total_valid_loss, total_correct = 0, 0
                for i, (src, tgt, src_percentages, src_lengths, tgt_lengths) in enumerate(valid_loader):
                    with torch.no_grad():
                        pred, gold, hyp_seq, gold_seq = model(src, src_lengths, tgt, verbose=False)
                        loss, num_correct = calculate_metrics(pred, gold, smoothing=0.0)
                    total_valid_loss += loss.item()
                    total_correct += num_correct
                print("(Epoch {}) VALID SET {} LOSS:{:.4f} CORRECT:{}".format(
                    epoch + 1, ind, total_valid_loss / len(valid_loader), total_correct))


if __name__ == "__main__":
    def batch():
        return torch.randn(2, 5, 6), torch.randint(0, 12, (2, 5)), None, torch.tensor([5, 5]), torch.tensor([5, 5])

    model = Transformer()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    Trainer().train(model, [batch() for _ in range(3)], [[batch() for _ in range(2)]], opt, smoothing=0.1)
