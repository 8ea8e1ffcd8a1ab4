from typing import Sequence

import torch
from torch import nn


class PartitionTCA(nn.Module):
    def __init__(self, dimensions: Sequence[int], partitions: Sequence[Sequence[Sequence[int]]], ranks: Sequence[int],
                 positive: bool = False):
        super().__init__()
        self.dimensions = tuple(dimensions)
        self.partitions = partitions
        self.ranks = ranks
        self.positive_function = [[torch.abs if positive else (lambda x: x) for _ in p] for p in partitions]
        self.vectors = nn.ModuleList(
            [nn.ParameterList([nn.Parameter(torch.randn(r, *[dimensions[k] for k in part])) for part in p])
             for p, r in zip(partitions, ranks)]
        )

    def construct_single_component(self, partition: int, k: int):
        temp = [self.positive_function[partition][q](self.vectors[partition][q][k]) for q in range(len(self.partitions[partition]))]
        return torch.einsum("i,jk->ijk", temp[0], temp[1])

    def construct(self):
        temp = torch.zeros(self.dimensions)
        for i in range(len(self.partitions)):
            for j in range(self.ranks[i]):
                temp += self.construct_single_component(i, j)
        return temp

    def forward(self):
        return self.construct()

    def get_components(self, detach=False, numpy=False):
        """
        Returns the components of the model.

        :param detach: Whether to detach the gradient.
        :param numpy: Whether to cast them to numpy arrays.
        :return: list of list of tensors.
        """

        temp = [[] for _ in range(len(self.vectors))]

        for i in range(len(self.vectors)):
            for j in range(len(self.vectors[i])):
                if numpy:
                    temp[i].append( self.positive_function[i][j](self.vectors[i][j]).detach().cpu().numpy())
                else:
                    if detach: temp[i].append(self.positive_function[i][j](self.vectors[i][j]).detach())
                    else: temp[i].append(self.positive_function[i][j](self.vectors[i][j]))

        return temp


if __name__ == "__main__":
    model = PartitionTCA((3, 4, 5), [[[0], [1, 2]]], [2], positive=True)
    components = model.get_components(detach=False)
    print([c.requires_grad for c in components[0]], round(float(model().sum()), 4))
    # a penalty on the components should reach the parameters
    penalty = sum(c.pow(2).sum() for c in components[0] if c.requires_grad)
    print("penalty has graph:", isinstance(penalty, torch.Tensor) and penalty.requires_grad)
