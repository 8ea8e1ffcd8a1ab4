"""pytorch-goodies losses.py dice_loss, minimized as a user wired it in: the class
probabilities are copy-constructed with torch.tensor(), which drops their history.

Report: "When I use dice loss ... I get RuntimeError: element 0 of tensors does not
require grad and does not have a grad_fn" (kevinzakka/pytorch-goodies#11).
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


def dice_loss(true, logits, eps=1e-7):
    num_classes = logits.shape[1]
    true_1_hot = torch.eye(num_classes)[true.squeeze(1)].permute(0, 3, 1, 2).float()
    probas = torch.tensor(F.softmax(logits, dim=1))
    dims = (0,) + tuple(range(2, true.ndimension()))
    intersection = torch.sum(probas * true_1_hot, dims)
    cardinality = torch.sum(probas + true_1_hot, dims)
    dice = (2.0 * intersection / (cardinality + eps)).mean()
    return 1 - dice


if __name__ == "__main__":
    model = nn.Conv2d(3, 4, 3, padding=1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        images, masks = torch.randn(2, 3, 8, 8), torch.randint(0, 4, (2, 1, 8, 8))
        loss = dice_loss(masks, model(images))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(step, loss.item())
