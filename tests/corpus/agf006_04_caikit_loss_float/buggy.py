import torch
import torch.nn as nn


class PeftPromptTuning:
    @staticmethod
    def _execute_train_loop(model, num_epochs, train_dataloader, optimizer, lr_scheduler, accumulate_steps=1):
        training_loss_tracker = []
        for epoch in range(num_epochs):
            model.train()
            total_loss = 0
            for step, batch in enumerate(train_dataloader):
                outputs = model(batch["input_ids"])
                loss = nn.functional.mse_loss(outputs, batch["labels"])
                total_loss += loss
                loss.backward()
                if (step + 1) % accumulate_steps == 0:
                    optimizer.step()
                    lr_scheduler.step()
                    optimizer.zero_grad()
            train_epoch_loss = total_loss / len(train_dataloader)
            training_loss_tracker.append({"epoch": epoch, "value": float(train_epoch_loss)})
        return training_loss_tracker


if __name__ == "__main__":
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    loader = [{"input_ids": torch.randn(4, 6), "labels": torch.randn(4, 1)} for _ in range(3)]
    for record in PeftPromptTuning._execute_train_loop(model, 2, loader, optimizer, scheduler):
        print(record["epoch"], f"{record['value']:.4f}")
