import torch
import torch.nn.functional as F
from torch import nn


class Net(torch.nn.Module):
    def __init__(self, args):
        super(Net, self).__init__()
        self.num_features = args.num_features
        self.nhid = args.nhid
        self.num_classes = args.num_classes
        self.lin1 = torch.nn.Linear(self.num_features, self.nhid)
        self.lin3 = torch.nn.Linear(self.nhid, self.num_classes)

    def forward(self, data):
        x = F.relu(self.lin1(data.x))
        x = x.mean(dim=0, keepdim=True)
        return F.log_softmax(self.lin3(x), dim=-1)


class Args:
    num_features = 4
    nhid = 8
    num_classes = 2
    lr = 0.005
    weight_decay = 1e-4
    epochs = 3


class Data:
    def __init__(self, x, y):
        self.x = x
        self.y = y


def test(model, loader):
    model.eval()
    correct = 0.0
    loss = 0.0
    with torch.no_grad():
        for data in loader:
            out = model(data)
            pred = out.max(dim=1)[1]
            correct += pred.eq(data.y).sum().item()
            loss += F.nll_loss(out, data.y, reduction="sum").item()
    return correct / len(loader), loss / len(loader)


if __name__ == "__main__":
    args = Args()
    model = Net(args)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    train_loader = [Data(torch.randn(5, 4), torch.randint(0, 2, (1,))) for _ in range(6)]
    val_loader = [Data(torch.randn(5, 4), torch.randint(0, 2, (1,))) for _ in range(3)]
    for epoch in range(args.epochs):
        model.train()
        for i, data in enumerate(train_loader):
            out = model(data)
            loss = F.nll_loss(out, data.y)
            print("Training loss:{:.4f}".format(loss.item()))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        val_acc, val_loss = test(model, val_loader)
        print("Validation loss:{:.4f}\taccuracy:{:.4f}".format(val_loss, val_acc))
