# Linear regression using PyTorch
import torch

X = torch.tensor([1, 2, 3, 4], dtype=torch.float32)
Y = torch.tensor([2, 4, 6, 8], dtype=torch.float32)

w = torch.tensor(0.0, dtype=torch.float32, requires_grad=True)


# Prediction
def predict(x):
    return w * x


# Loss
def loss1(y, y_pred):
    return ((y_pred - y) ** 2).mean()


# Training
epochs = 100
lr = 0.01
for epoch in range(1, epochs + 1):
    y_pred = predict(X)
    l = loss1(Y, y_pred)
    l.backward()

    with torch.no_grad():
        w -= lr * w.grad

    w.grad.zero_()

    if epoch % 20 == 0:
        print(f"Epoch {epoch}: w = {w.item():.3f}, loss = {l.item():.8f}")
