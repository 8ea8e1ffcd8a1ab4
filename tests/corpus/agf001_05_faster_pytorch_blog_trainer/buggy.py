import torch
import torch.nn.functional as F


class LightningModel(torch.nn.Module):
    def __init__(self, model, learning_rate):
        super().__init__()
        self.learning_rate = learning_rate
        self.model = model
        self.logged = {}

    def log(self, name, value):
        self.logged.setdefault(name, []).append(float(value))

    def forward(self, x):
        return self.model(x)

    def _shared_step(self, batch):
        features, true_labels = batch
        logits = self(features)
        loss = F.cross_entropy(logits, true_labels)
        predicted_labels = torch.argmax(logits, dim=1)
        return loss, true_labels, predicted_labels

    def training_step(self, batch, batch_idx):
        loss, true_labels, predicted_labels = self._shared_step(batch)
        self.log("train_loss", loss.item())
        return loss

    def validation_step(self, batch, batch_idx):
        loss, true_labels, predicted_labels = self._shared_step(batch)
        self.log("val_loss", loss)
        self.log("val_acc", (predicted_labels == true_labels).float().mean())

    def test_step(self, batch, batch_idx):
        loss, true_labels, predicted_labels = self._shared_step(batch)
        self.log("test_acc", (predicted_labels == true_labels).float().mean())

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.learning_rate)


class Trainer:
    """The part of Lightning's Trainer this script relies on: evaluation loops run under no_grad."""

    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def fit(self, model, train_dataloaders, val_dataloaders):
        optimizer = model.configure_optimizers()
        for epoch in range(self.max_epochs):
            model.train()
            for batch_idx, batch in enumerate(train_dataloaders):
                loss = model.training_step(batch, batch_idx)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            self._run_eval(model, val_dataloaders, model.validation_step)

    def test(self, model, dataloaders):
        self._run_eval(model, dataloaders, model.test_step)

    @staticmethod
    def _run_eval(model, dataloaders, step):
        model.eval()
        with torch.no_grad():
            for batch_idx, batch in enumerate(dataloaders):
                step(batch, batch_idx)
        model.train()


if __name__ == "__main__":
    pytorch_model = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    lightning_model = LightningModel(model=pytorch_model, learning_rate=0.01)
    train_loader = [(torch.randn(8, 10), torch.randint(0, 3, (8,))) for _ in range(4)]
    val_loader = [(torch.randn(8, 10), torch.randint(0, 3, (8,))) for _ in range(2)]
    trainer = Trainer(max_epochs=2)
    trainer.fit(model=lightning_model, train_dataloaders=train_loader, val_dataloaders=val_loader)
    trainer.test(model=lightning_model, dataloaders=val_loader)
    print({name: round(values[-1], 4) for name, values in lightning_model.logged.items()})
