from typing import Optional

import torch
from torch import Tensor


def _symeig_backward(D_grad, U_grad, A, D, U, largest):
    # only the eigenvalue part of the gradient, as torch.lobpcg's backward computes for full spectra
    return U @ torch.diag_embed(D_grad) @ U.mT


def _lobpcg(A: Tensor, k: int, B: Optional[Tensor], largest: bool):
    evals, evecs = torch.linalg.eigh(A)
    if largest:
        evals, evecs = evals.flip(-1), evecs.flip(-1)
    return evals[..., :k], evecs[..., :k]


class LOBPCGAutogradFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A: Tensor, k: Optional[int] = None, B: Optional[Tensor] = None, largest: Optional[bool] = None):
        # makes sure that input is contiguous for efficiency.
        A = A.contiguous() if (not A.is_sparse) else A
        if B is not None:
            B = B.contiguous() if (not B.is_sparse) else B

        D, U = _lobpcg(A, k, B, largest)

        ctx.save_for_backward(A, B, D, U)
        ctx.largest = largest

        return D, U

    @staticmethod
    def backward(ctx, D_grad, U_grad):
        A_grad = B_grad = None
        grads = [None] * 4

        A, B, D, U = ctx.saved_tensors
        largest = ctx.largest

        # lobpcg.backward has some limitations. Checks for unsupported input
        if A.is_sparse or (B is not None and B.is_sparse and ctx.needs_input_grad[2]):
            raise ValueError("lobpcg.backward does not support sparse input yet.")

        A_grad = _symeig_backward(D_grad, U_grad, A, D, U, largest)
        grads[0] = A_grad
        grads[2] = B_grad
        return tuple(grads)


def lobpcg(A, k=None, B=None, largest=True):
    A_sym = (A + A.mT) / 2
    B_sym = (B + B.mT) / 2 if (B is not None) else None
    return LOBPCGAutogradFunction.apply(A_sym, k, B_sym, largest)


if __name__ == "__main__":
    a = torch.randn((6, 6), requires_grad=True)
    a = a + a.T
    D, U = lobpcg(a, k=2, largest=False)
    D.sum().backward()
    print([round(v, 4) for v in D.tolist()])
