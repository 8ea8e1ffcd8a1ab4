import gc
import weakref

import torch


class Test(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, refs):
        refs.append(weakref.ref(ctx))
        y = x.clone()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        y, = ctx.saved_tensors
        return grad_y * torch.ones_like(y), None


if __name__ == "__main__":
    gc.disable()  # the cycle is only broken by the cyclic collector
    refs = []  # weakrefs to ctx objects
    x = torch.rand(8, 8, requires_grad=True)
    y = Test.apply(x, refs)
    y.sum().backward()
    print("grad", round(x.grad.sum().item(), 4))
    del y
    print("ctx alive after del:", refs[0]() is not None)
    gc.enable()
