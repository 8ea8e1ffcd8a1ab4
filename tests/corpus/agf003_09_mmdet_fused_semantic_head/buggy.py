import torch
import torch.nn as nn
import torch.nn.functional as F


def ConvModule(in_channels, out_channels, kernel_size, padding=0, conv_cfg=None, norm_cfg=None, inplace=True):
    """Stand-in for mmcv's ConvModule without a norm layer: conv (with bias) -> ReLU."""
    return nn.Sequential(nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding),
                         nn.ReLU(inplace=inplace))


class FusedSemanticHead(nn.Module):
    r"""Multi-level fused semantic segmentation head."""

    def __init__(self,
                 num_ins,
                 fusion_level,
                 num_convs=4,
                 in_channels=256,
                 conv_out_channels=256,
                 num_classes=183,
                 conv_cfg=None,
                 norm_cfg=None,
                 loss_weight=0.2):
        super(FusedSemanticHead, self).__init__()
        self.num_ins = num_ins
        self.fusion_level = fusion_level
        self.num_convs = num_convs
        self.in_channels = in_channels
        self.conv_out_channels = conv_out_channels
        self.num_classes = num_classes
        self.conv_cfg = conv_cfg
        self.norm_cfg = norm_cfg

        self.lateral_convs = nn.ModuleList()
        for i in range(self.num_ins):
            self.lateral_convs.append(
                ConvModule(
                    self.in_channels,
                    self.in_channels,
                    1,
                    conv_cfg=self.conv_cfg,
                    norm_cfg=self.norm_cfg,
                    inplace=False))

        self.convs = nn.ModuleList()
        for i in range(self.num_convs):
            in_channels = self.in_channels if i == 0 else conv_out_channels
            self.convs.append(
                ConvModule(
                    in_channels,
                    conv_out_channels,
                    3,
                    padding=1,
                    conv_cfg=self.conv_cfg,
                    norm_cfg=self.norm_cfg))
        self.conv_embedding = ConvModule(
            conv_out_channels,
            conv_out_channels,
            1,
            conv_cfg=self.conv_cfg,
            norm_cfg=self.norm_cfg)
        self.conv_logits = nn.Conv2d(conv_out_channels, self.num_classes, 1)
        self.loss_weight = loss_weight
        self.criterion = nn.CrossEntropyLoss(ignore_index=255)

    def forward(self, feats):
        x = self.lateral_convs[self.fusion_level](feats[self.fusion_level])
        fused_size = tuple(x.shape[-2:])
        for i, feat in enumerate(feats):
            if i != self.fusion_level:
                feat = F.interpolate(
                    feat, size=fused_size, mode='bilinear', align_corners=True)
                x += self.lateral_convs[i](feat)

        for i in range(self.num_convs):
            x = self.convs[i](x)

        mask_pred = self.conv_logits(x)
        x = self.conv_embedding(x)
        return mask_pred, x

    def loss(self, mask_pred, labels):
        labels = labels.squeeze(1).long()
        loss_semantic_seg = self.loss_weight * self.criterion(mask_pred, labels)
        return loss_semantic_seg


if __name__ == "__main__":
    semantic_head = FusedSemanticHead(num_ins=3, fusion_level=1, num_convs=2, in_channels=8, conv_out_channels=8, num_classes=5)
    optimizer = torch.optim.SGD(semantic_head.parameters(), lr=0.1)
    for step in range(3):
        feats = [torch.randn(2, 8, s, s) for s in (16, 8, 4)]
        gt_semantic_seg = torch.randint(0, 5, (2, 1, 8, 8))
        mask_pred, semantic_feat = semantic_head(feats)
        loss_seg = semantic_head.loss(mask_pred, gt_semantic_seg)
        optimizer.zero_grad()
        loss_seg.backward()
        optimizer.step()
        print(f"step {step} loss_semantic_seg {loss_seg.item():.4f}")
