# !/usr/bin/python
# -*- coding: utf-8 -*-
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import Function


class kernelconv2d_cuda:
    """CPU stand-in for the compiled extension: same signature, writes into its output arguments."""

    @staticmethod
    def forward(input, kernel, kernel_size, output):
        b, c = input.shape[:2]
        h, w = kernel.shape[2:]
        patches = F.unfold(input, kernel_size).view(b, c, kernel_size * kernel_size, h, w)
        output.copy_((patches * kernel.view(b, c, kernel_size * kernel_size, h, w)).sum(2))

    @staticmethod
    def backward(input, kernel, kernel_size, grad_output, grad_input, grad_kernel):
        b, c = input.shape[:2]
        h, w = kernel.shape[2:]
        k2 = kernel_size * kernel_size
        patches = F.unfold(input, kernel_size).view(b, c, k2, h, w)
        cols = (grad_output.unsqueeze(2) * kernel.view(b, c, k2, h, w)).view(b, c * k2, h * w)
        grad_input.copy_(F.fold(cols, input.shape[2:], kernel_size))
        grad_kernel.copy_((patches * grad_output.unsqueeze(2)).view(b, c * k2, h, w))


class KernelConv2DFunction(Function):
    # def __init__(self, kernel_size=3):
    #     super(KernelConv2DFunction, self).__init__()
    #     self.kernel_size = kernel_size
    @staticmethod
    def forward(ctx, input, kernel, kernel_size):
        ctx.kernel_size = kernel_size
        assert (input.is_contiguous() == True)
        assert (kernel.is_contiguous() == True)
        ctx.save_for_backward(input, kernel)
        assert (ctx.kernel_size == int((kernel.size(1) / input.size(1)) ** 0.5))
        intKernelSize = ctx.kernel_size
        intBatches = input.size(0)
        intInputDepth = input.size(1)
        intInputHeight = input.size(2)
        intInputWidth = input.size(3)
        intOutputHeight = kernel.size(2)
        intOutputWidth = kernel.size(3)

        assert (intInputHeight - intKernelSize == intOutputHeight - 1)
        assert (intInputWidth - intKernelSize == intOutputWidth - 1)

        with torch.cuda.device_of(input):
            output = input.new().resize_(intBatches, intInputDepth, intOutputHeight, intOutputWidth).zero_()
            kernelconv2d_cuda.forward(input, kernel, intKernelSize, output)

        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, kernel = ctx.saved_tensors
        intKernelSize = ctx.kernel_size
        grad_output = grad_output.contiguous()
        with torch.cuda.device_of(input):
            grad_input = input.new().resize_(input.size()).zero_()
            grad_kernel = kernel.new().resize_(kernel.size()).zero_()
            kernelconv2d_cuda.backward(input, kernel, intKernelSize, grad_output, grad_input, grad_kernel)

        return grad_input, grad_kernel, None


class KernelConv2D(nn.Module):
    def __init__(self, kernel_size):
        super(KernelConv2D, self).__init__()
        assert (kernel_size % 2 == 1)
        self.kernel_size = kernel_size
        self.pad = torch.nn.ReplicationPad2d(
            [(kernel_size - 1) // 2, (kernel_size - 1) // 2, (kernel_size - 1) // 2, (kernel_size - 1) // 2])

    def forward(self, input, kernel):
        input_pad = self.pad(input)
        return KernelConv2DFunction.apply(input_pad, kernel, self.kernel_size)


class DeblurNet(nn.Module):
    def __init__(self, ks=3, ch=4):
        super(DeblurNet, self).__init__()
        self.img_conv = nn.Conv2d(3, ch, 3, padding=1)
        self.kernel_conv = nn.Conv2d(3, ch * ks * ks, 3, padding=1)
        self.kconv_deblur = KernelConv2D(kernel_size=ks)
        self.img_prd = nn.Conv2d(ch, 3, 3, padding=1)

    def forward(self, img_blur):
        img_feat = self.img_conv(img_blur)
        kernel_deblur = self.kernel_conv(img_blur)
        deblur_feat = self.kconv_deblur(img_feat, kernel_deblur)
        return self.img_prd(deblur_feat) + img_blur


if __name__ == "__main__":
    deblurnet = DeblurNet()
    optimizer = torch.optim.Adam(deblurnet.parameters(), lr=1e-3)
    for step in range(3):
        img_blur, img_clear = torch.rand(2, 3, 8, 8), torch.rand(2, 3, 8, 8)
        output_img = deblurnet(img_blur)
        loss = F.mse_loss(output_img, img_clear)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.5f}")
