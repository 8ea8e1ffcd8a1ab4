import numpy as np
import torch
import torch.nn as nn


class FullyConnectedNN(nn.Module):
    def __init__(self, layer_sizes, activation_function=torch.tanh):
        super().__init__()
        self.input_dimension = layer_sizes[0]
        self.output_dimension = layer_sizes[-1]
        self.layers = nn.ModuleList([nn.Linear(int(a), int(b)) for a, b in zip(layer_sizes[:-1], layer_sizes[1:])])
        self.activation_function = activation_function

    def forward(self, x):
        for i in range(len(self.layers) - 1):
            x = self.activation_function(self.layers[i](x))
        return self.layers[len(self.layers) - 1](x)


class NeuralNetworkModel:
    """Reduced order model that evaluates a neural network on the parameter values."""

    def __init__(self, neural_network, parameters, output_functional=None, name=None):
        self.neural_network = neural_network
        self.parameters = parameters
        self.name = name

    def _compute_solution(self, mu=None):
        # convert the parameter `mu` into a form that is usable in PyTorch
        converted_input = torch.from_numpy(np.asarray(mu, dtype=np.float64)).double()
        # obtain (reduced) coordinates by forward pass of the parameter values through the neural network
        U = self.neural_network(converted_input).data.numpy()
        return U

    def solve(self, mu):
        return self._compute_solution(mu)


if __name__ == "__main__":
    torch.manual_seed(0)
    network = FullyConnectedNN([2, 10, 3]).double()
    rom = NeuralNetworkModel(network, parameters={"mu": 2})
    print(np.round(rom.solve([0.5, 1.5]), 4).tolist())
