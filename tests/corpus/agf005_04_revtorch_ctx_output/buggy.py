import gc
import weakref

import torch
import torch.nn as nn


class ReversibleBlock(nn.Module):
    '''
    Elementary building block for building (partially) reversible architectures
    '''

    def __init__(self, f_block, g_block):
        super(ReversibleBlock, self).__init__()
        self.f_block = f_block
        self.g_block = g_block

    def forward(self, x):
        x1, x2 = torch.chunk(x, 2, dim=1)
        y1, y2 = None, None
        with torch.no_grad():
            y1 = x1 + self.f_block(x2)
            y2 = x2 + self.g_block(y1)

        return torch.cat([y1, y2], dim=1)

    def backward_pass(self, y, dy):
        # Split the arguments channel-wise
        y1, y2 = torch.chunk(y, 2, dim=1)
        del y
        assert (not y1.requires_grad), "y1 must already be detached"
        assert (not y2.requires_grad), "y2 must already be detached"
        dy1, dy2 = torch.chunk(dy, 2, dim=1)
        del dy
        assert (not dy1.requires_grad), "dy1 must not require grad"
        assert (not dy2.requires_grad), "dy2 must not require grad"

        # Enable autograd for y1 and y2. This ensures that PyTorch
        # keeps track of ops. that use y1 and y2 as inputs in a DAG
        y1.requires_grad = True
        y2.requires_grad = True

        # Ensures that PyTorch tracks the operations in a DAG
        with torch.enable_grad():
            gy1 = self.g_block(y1)
            gy1.backward(dy2)

        with torch.no_grad():
            x2 = y2 - gy1  # Restore first input of forward()
            del y2, gy1
            dx1 = dy1 + y1.grad
            del dy1
            y1.grad = None

        with torch.enable_grad():
            x2.requires_grad = True
            fx2 = self.f_block(x2)
            fx2.backward(dx1)

        with torch.no_grad():
            x1 = y1 - fx2  # Restore second input of forward()
            del y1, fx2
            dx2 = dy2 + x2.grad
            del dy2
            x2.grad = None

            # Undo the channelwise split
            x = torch.cat([x1, x2.detach()], dim=1)
            dx = torch.cat([dx1, dx2], dim=1)

        return x, dx


class _ReversibleModuleFunction(torch.autograd.function.Function):
    '''
    Integrates the reversible sequence into the autograd framework
    '''

    @staticmethod
    def forward(ctx, x, reversible_blocks):
        assert (isinstance(reversible_blocks, nn.ModuleList))
        for block in reversible_blocks:
            assert (isinstance(block, ReversibleBlock))
            x = block(x)
        ctx.y = x #not using ctx.save_for_backward(x) saves us memory by beeing able to free ctx.y earlier in the backward pass
        ctx.reversible_blocks = reversible_blocks
        return x

    @staticmethod
    def backward(ctx, dy):
        y = ctx.y
        del ctx.y
        for i in range(len(ctx.reversible_blocks) - 1, -1, -1):
            y, dy = ctx.reversible_blocks[i].backward_pass(y, dy)
        del ctx.reversible_blocks
        return dy, None


class ReversibleSequence(nn.Module):
    def __init__(self, reversible_blocks):
        super(ReversibleSequence, self).__init__()
        assert (isinstance(reversible_blocks, nn.ModuleList))
        for block in reversible_blocks:
            assert(isinstance(block, ReversibleBlock))

        self.reversible_blocks = reversible_blocks

    def forward(self, x):
        x = _ReversibleModuleFunction.apply(x, self.reversible_blocks)
        return x


class Net(nn.Module):

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, kernel_size=1)
        self.rev1 = ReversibleSequence(nn.ModuleList([
                ReversibleBlock(nn.Conv2d(1, 1, kernel_size=1),
                                nn.Conv2d(1, 1, kernel_size=1))]))
        self.rev2 = ReversibleSequence(nn.ModuleList(
                [ReversibleBlock(nn.Conv2d(1, 1, kernel_size=1),
                                 nn.Conv2d(1, 1, kernel_size=1))]))

    def forward(self, x):
        x = nn.functional.relu(self.conv(x))
        y1 = nn.functional.relu(self.rev1(x))
        y2 = nn.functional.relu(self.rev2(x))
        return y1, y2


if __name__ == "__main__":
    gc.disable()  # as in a long run between collections: only reference counting frees memory
    net = Net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    unconsumed = []
    for step in range(5):
        y1, y2 = net(torch.rand(4, 2, 3, 3))
        unconsumed.append(weakref.ref(y2))
        loss = y1.pow(2).mean()  # only the first output reaches the loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.5f}")
        del y1, y2, loss
    print("unconsumed outputs still alive:", sum(ref() is not None for ref in unconsumed))
