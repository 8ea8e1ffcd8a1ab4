import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Sequential(nn.Linear(12, 16), nn.ReLU())
        self.out = nn.Linear(16, 3)

    def forward(self, x, ret_hid=False, train=True):
        h = self.hidden(x)
        return (self.out(h), h) if ret_hid else self.out(h)


def entropy_reg(hid_repr, targets):
    return hid_repr.pow(2).mean()


class Args:
    beta = 0.1
    lr = 0.01
    wdecay = 0.0


args = Args()
model = MLP()
criterion = nn.CrossEntropyLoss()
trainloader = [(torch.randn(8, 12), torch.randint(0, 3, (8,))) for _ in range(5)]
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.wdecay)


def train(epoch):
    global trainloader, optimizer, args, model
    model.train()
    correct = 0
    total = 0
    total_loss, tot_regularization_loss = 0, 0

    optimizer.zero_grad()
    tot_iters = len(trainloader)
    for batch_idx in range(tot_iters):
        inputs, targets = trainloader[batch_idx]

        outputs, hid_repr = model(inputs, ret_hid=True)

        loss = criterion(outputs, targets)

        regularization_loss = entropy_reg(hid_repr, targets.cpu().numpy())
        tot_regularization_loss = tot_regularization_loss + regularization_loss.item()

        total_loss_ = loss + args.beta * regularization_loss
        total_loss_.backward()

        total_loss += loss.item()
        _, predicted = torch.max(nn.Softmax(dim=1)(outputs).detach(), 1)
        total += targets.size(0)
        correct += predicted.eq(targets).cpu().sum().item()

        optimizer.step()

    acc = 100.0 * correct / total
    return total_loss / (batch_idx + 1), acc, tot_regularization_loss / (batch_idx + 1)


for epoch in range(1, 3):
    loss, train_acc, regularization_loss = train(epoch)
    print("Epoch {} | Loss {:3.4f} | acc {:3.2f} | reg_loss : {:3.4f}".format(epoch, loss, train_acc, regularization_loss))
