import numpy as np
import torch


class Softplus:
    def func(self, x):
        return np.log(1.0 + np.exp(-np.abs(x))) + np.maximum(x, 0.0)


print(Softplus().func(np.array([-100.0, 0.0, 100.0])), torch.__name__)
