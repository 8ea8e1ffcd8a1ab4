import torch


class SegmentConsensus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_tensor, consensus_type, dim=1):
        ctx.shape = input_tensor.size()
        ctx.consensus_type = consensus_type
        ctx.dim = dim
        if consensus_type == "avg":
            return input_tensor.mean(dim=dim, keepdim=True)
        if consensus_type == "identity":
            return input_tensor
        raise ValueError(consensus_type)

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.consensus_type == "avg":
            grad_in = grad_output.expand(ctx.shape) / float(ctx.shape[ctx.dim])
        elif ctx.consensus_type == "identity":
            grad_in = grad_output
        else:
            grad_in = None
        return grad_in, None, None


class ConsensusModule(torch.nn.Module):
    def __init__(self, consensus_type, dim=1):
        super().__init__()
        self.consensus_type = consensus_type if consensus_type != "rnn" else "identity"
        self.dim = dim

    def forward(self, x):
        return SegmentConsensus.apply(x, self.consensus_type, self.dim)


# (batch, segments, classes): average the per-segment scores of each video
scores = torch.randn(2, 8, 10, requires_grad=True)
ConsensusModule("avg")(scores).sum().backward()
print(scores.grad[0, :2, :3])
