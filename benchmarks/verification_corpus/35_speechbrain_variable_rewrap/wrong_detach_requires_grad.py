"""A speechbrain-style Brain, minimized: compute_objectives re-wraps the loss in a
fresh Variable "so that backward works", which cuts it off the model.

Report: "I did this need write loss=Variable(loss,requires_grad=True), can you give
me some suggest?" (speechbrain/speechbrain#735).
"""
import torch
from torch import nn
from torch.autograd import Variable

torch.manual_seed(0)


class SpeakerBrain:
    def __init__(self, modules, opt_class):
        self.modules = modules
        self.optimizer = opt_class(self.modules.parameters())

    def compute_forward(self, batch):
        feats, _ = batch
        return {"predict": self.modules(feats)}

    def compute_objectives(self, predictions, batch):
        _, labels = batch
        loss = nn.functional.nll_loss(predictions["predict"].log_softmax(-1), labels)
        loss = loss.detach().requires_grad_()
        return loss

    def fit_batch(self, batch):
        outputs = self.compute_forward(batch)
        loss = self.compute_objectives(outputs, batch)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        return loss.detach()


if __name__ == "__main__":
    model = nn.Sequential(nn.Linear(20, 32), nn.LeakyReLU(), nn.Linear(32, 4))
    brain = SpeakerBrain(model, lambda params: torch.optim.Adam(params, lr=1e-3))
    for step in range(4):
        batch = (torch.randn(8, 20), torch.randint(0, 4, (8,)))
        print(step, brain.fit_batch(batch).item())
