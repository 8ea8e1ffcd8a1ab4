"""BEVDet voxel pooling, minimized: the BEV grid shape (a tuple) is passed to
ctx.save_for_backward.

Report: "TypeError: save_for_backward can only save variables, but argument 1 is of
type tuple" (HuangJunJie2017/BEVDet#8).
"""
import torch
from torch.autograd import Function


class VoxelPooling(Function):
    @staticmethod
    def forward(ctx, feats, ranks, bev_shape):
        out = feats.new_zeros(bev_shape[0] * bev_shape[1], feats.size(1))
        out.index_add_(0, ranks, feats)
        ctx.bev_shape = bev_shape
        return out.view(bev_shape[0], bev_shape[1], -1)

    @staticmethod
    def backward(ctx, grad_out):
        return None, None, None


def voxel_pooling(feats, ranks, bev_shape=(4, 4)):
    return VoxelPooling.apply(feats, ranks, tuple(bev_shape))
