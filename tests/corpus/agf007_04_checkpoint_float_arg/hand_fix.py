import torch
import torch.nn as nn


def detach_variable(inputs):
    if isinstance(inputs, tuple):
        out = []
        for inp in inputs:
            if not isinstance(inp, torch.Tensor):
                out.append(inp)
                continue

            x = inp.detach()
            x.requires_grad = inp.requires_grad
            out.append(x)
        return tuple(out)
    else:
        raise RuntimeError(
            "Only tuple of tensors is supported. Got Unsupported input type: ", type(inputs).__name__)


class CheckpointFunction(torch.autograd.Function):

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        if preserve_rng_state:
            ctx.fwd_cpu_state = torch.get_rng_state()
        # Save non-tensor inputs in ctx, keep a placeholder None for tensors
        # to be filled out during the backward.
        ctx.inputs = []
        ctx.tensor_indices = []
        tensor_inputs = []
        for i, arg in enumerate(args):
            if torch.is_tensor(arg):
                tensor_inputs.append(arg)
                ctx.tensor_indices.append(i)
                ctx.inputs.append(None)
            else:
                ctx.inputs.append(arg)

        ctx.save_for_backward(*tensor_inputs)
        with torch.no_grad():
            outputs = run_function(*args)
        return outputs

    @staticmethod
    def backward(ctx, *args):
        # Copy the list to avoid modifying original list.
        inputs = list(ctx.inputs)
        tensor_indices = ctx.tensor_indices
        tensors = ctx.saved_tensors

        # Fill in inputs with appropriate saved tensors.
        for i, idx in enumerate(tensor_indices):
            inputs[idx] = tensors[i]
        inputs = tuple(inputs)
        with torch.random.fork_rng(devices=[], enabled=ctx.preserve_rng_state):
            if ctx.preserve_rng_state:
                torch.set_rng_state(ctx.fwd_cpu_state)
            detached_inputs = detach_variable(inputs)
            with torch.enable_grad():
                outputs = ctx.run_function(*detached_inputs)

        if isinstance(outputs, torch.Tensor):
            outputs = (outputs,)
        torch.autograd.backward(outputs, args)
        grads = tuple(inp.grad if isinstance(inp, torch.Tensor) else None
                      for inp in detached_inputs)
        return (None, None) + grads


def checkpoint(function, *args, **kwargs):
    preserve = kwargs.pop('preserve_rng_state', True)
    return CheckpointFunction.apply(function, preserve, *args)


def drop_connect(inputs, p, training):
    if not training:
        return inputs
    keep_prob = 1 - p
    random_tensor = keep_prob + torch.rand([inputs.shape[0], 1, 1, 1], dtype=inputs.dtype)
    return inputs / keep_prob * torch.floor(random_tensor)


class MBConvBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self._expand_conv = nn.Conv2d(channels, channels * 2, 1, bias=False)
        self._bn0 = nn.BatchNorm2d(channels * 2)
        self._project_conv = nn.Conv2d(channels * 2, channels, 1, bias=False)
        self._swish = nn.SiLU()

    def forward(self, inputs, drop_connect_rate=None):
        x = self._swish(self._bn0(self._expand_conv(inputs)))
        x = self._project_conv(x)
        if drop_connect_rate:
            x = drop_connect(x, p=drop_connect_rate, training=self.training)
        return x + inputs


class EfficientNet(nn.Module):
    def __init__(self, channels=4, num_blocks=3, drop_connect_rate=0.2, num_classes=5):
        super().__init__()
        self._conv_stem = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self._blocks = nn.ModuleList([MBConvBlock(channels) for _ in range(num_blocks)])
        self.drop_connect_rate = drop_connect_rate
        self._fc = nn.Linear(channels, num_classes)

    def forward(self, x):
        x = self._conv_stem(x)
        for idx, block in enumerate(self._blocks):
            drop_connect_rate = self.drop_connect_rate * float(idx) / len(self._blocks)
            x = checkpoint(block, x, drop_connect_rate, preserve_rng_state=True)
        return self._fc(x.mean((2, 3)))


if __name__ == "__main__":
    model = EfficientNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        images, labels = torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")
