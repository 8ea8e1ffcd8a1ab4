import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.module import Module
from torch.autograd import Function


class correlation_cuda:
    """CPU stand-in for the compiled extension: same call signature, writes into its output arguments."""

    @staticmethod
    def _correlate(input1, input2, pad_size, max_displacement, stride2):
        padded = F.pad(input2, [pad_size] * 4)
        height, width = input1.shape[-2:]
        planes = []
        for dy in range(-max_displacement, max_displacement + 1, stride2):
            for dx in range(-max_displacement, max_displacement + 1, stride2):
                shifted = padded[:, :, pad_size + dy:pad_size + dy + height, pad_size + dx:pad_size + dx + width]
                planes.append((input1 * shifted).mean(1))
        return torch.stack(planes, 1)

    @staticmethod
    def forward(input1, input2, rbot1, rbot2, output, pad_size, kernel_size, max_displacement, stride1, stride2, corr_multiply):
        result = correlation_cuda._correlate(input1, input2, pad_size, max_displacement, stride2)
        output.resize_(result.shape).copy_(result)

    @staticmethod
    def backward(input1, input2, rbot1, rbot2, grad_output, grad_input1, grad_input2, pad_size, kernel_size, max_displacement, stride1, stride2, corr_multiply):
        with torch.enable_grad():
            a = input1.detach().requires_grad_()
            b = input2.detach().requires_grad_()
            result = correlation_cuda._correlate(a, b, pad_size, max_displacement, stride2)
            ga, gb = torch.autograd.grad(result, (a, b), grad_output)
        grad_input1.resize_(ga.shape).copy_(ga)
        grad_input2.resize_(gb.shape).copy_(gb)


class CorrelationFunction(Function):

    @staticmethod
    def forward(ctx, input1, input2, pad_size=3, kernel_size=3, max_displacement=20, stride1=1, stride2=2, corr_multiply=1):
        ctx.save_for_backward(input1, input2, pad_size, kernel_size, max_displacement, stride1, stride2, corr_multiply)

        with torch.cuda.device_of(input1):
            rbot1 = input1.new()
            rbot2 = input2.new()
            output = input1.new()

            correlation_cuda.forward(input1, input2, rbot1, rbot2, output,
                                     pad_size, kernel_size, max_displacement,
                                     stride1, stride2, corr_multiply)

        return output

    @staticmethod
    def backward(ctx, grad_output):
        input1, input2, pad_size, kernel_size, max_displacement, stride1, stride2, corr_multiply = ctx.saved_tensors

        with torch.cuda.device_of(input1):
            rbot1 = input1.new()
            rbot2 = input2.new()

            grad_input1 = input1.new()
            grad_input2 = input2.new()

            correlation_cuda.backward(input1, input2, rbot1, rbot2, grad_output, grad_input1, grad_input2,
                                      pad_size, kernel_size, max_displacement,
                                      stride1, stride2, corr_multiply)

        return grad_input1, grad_input2


class Correlation(Module):
    def __init__(self, pad_size=0, kernel_size=0, max_displacement=0, stride1=1, stride2=2, corr_multiply=1):
        super(Correlation, self).__init__()
        self.pad_size = pad_size
        self.kernel_size = kernel_size
        self.max_displacement = max_displacement
        self.stride1 = stride1
        self.stride2 = stride2
        self.corr_multiply = corr_multiply

    def forward(self, input1, input2):

        result = CorrelationFunction.apply(input1, input2, self.pad_size, self.kernel_size, self.max_displacement, self.stride1, self.stride2, self.corr_multiply)

        return result


class CropVelocity(nn.Module):
    def __init__(self):
        super().__init__()
        self.feature = nn.Conv2d(3, 8, 3, padding=1)
        self.corr = Correlation(pad_size=2, kernel_size=1, max_displacement=2, stride1=1, stride2=1, corr_multiply=1)
        self.head = nn.Linear(25, 2)

    def forward(self, data):
        c16 = self.feature(data["frame1"])
        c26 = self.feature(data["frame2"])
        corr6 = self.corr(c16, c26)
        return self.head(F.leaky_relu(corr6, 0.1).mean((2, 3)))


class Trainer:
    def __init__(self):
        self.model = CropVelocity()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.loader = [
            {"frame1": torch.randn(2, 3, 6, 6), "frame2": torch.randn(2, 3, 6, 6), "velocity": torch.randn(2, 2)}
            for _ in range(3)
        ]

    def train(self):
        for epoch in range(2):
            total = 0.0
            for data in self.loader:
                res = self.model(data)
                loss = F.smooth_l1_loss(res, data["velocity"])
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                total += loss.item()
            print(f"epoch {epoch} loss {total:.4f}")


def main():
    model = Trainer()
    model.train()


if __name__ == "__main__":
    main()
