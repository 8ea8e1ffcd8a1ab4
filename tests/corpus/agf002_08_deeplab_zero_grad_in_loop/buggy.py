import torch
import torch.nn as nn
import torch.optim as optim

LEARNING_RATE = 2.5e-4
NUM_STEPS = 6
POWER = 0.9


def lr_poly(base_lr, iter, max_iter, power):
    return base_lr * ((1 - float(iter) / max_iter) ** (power))


def adjust_learning_rate(optimizer, i_iter):
    lr = lr_poly(LEARNING_RATE, i_iter, NUM_STEPS, POWER)
    optimizer.param_groups[0]["lr"] = lr
    if len(optimizer.param_groups) > 1:
        optimizer.param_groups[1]["lr"] = lr * 10


def loss_calc(pred, label):
    return nn.CrossEntropyLoss(ignore_index=255)(pred, label.long())


class ResNetDeeplab(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.layer5 = nn.Conv2d(8, num_classes, 1)

    def get_1x_lr_params_NOscale(self):
        yield from self.conv1.parameters()

    def get_10x_lr_params(self):
        yield from self.layer5.parameters()

    def forward(self, x):
        return self.layer5(torch.relu(self.conv1(x)))


def main():
    model = ResNetDeeplab()
    model.train()
    trainloader = [(torch.randn(2, 3, 8, 8), torch.randint(0, 3, (2, 8, 8)), None, None) for _ in range(NUM_STEPS)]
    optimizer = optim.SGD(
        [
            {"params": model.get_1x_lr_params_NOscale(), "lr": LEARNING_RATE},
            {"params": model.get_10x_lr_params(), "lr": 10 * LEARNING_RATE},
        ],
        lr=LEARNING_RATE, momentum=0.9, weight_decay=0.0005,
    )
    optimizer.zero_grad()

    for i_iter, batch in enumerate(trainloader):
        images, labels, _, _ = batch
        optimizer.zero_grad()
        adjust_learning_rate(optimizer, i_iter)
        pred = model(images)
        loss = loss_calc(pred, labels)
        loss.backward()
        optimizer.step()

        print("iter = {} of {} completed, loss = {:.4f}".format(i_iter, NUM_STEPS, loss.item()))


if __name__ == "__main__":
    main()
