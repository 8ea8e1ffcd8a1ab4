from types import SimpleNamespace

import torch
import torch.nn.functional as F


class DCRNN(torch.nn.Module):
    """Stand-in for torch_geometric_temporal's DCRNN: one diffusion step over the weighted edges."""

    def __init__(self, in_channels, out_channels, K):
        super(DCRNN, self).__init__()
        self.linear = torch.nn.Linear(2 * in_channels, out_channels)

    def forward(self, X, edge_index, edge_weight):
        src, dst = edge_index
        agg = torch.zeros_like(X).index_add(0, dst, X[src] * edge_weight.unsqueeze(1))
        return self.linear(torch.cat([X, agg], dim=1))


class RecurrentGCN(torch.nn.Module):
    def __init__(self, node_features):
        super(RecurrentGCN, self).__init__()
        self.recurrent = DCRNN(node_features, 32, 1)
        self.linear = torch.nn.Linear(32, 1)

    def forward(self, x, edge_index, edge_weight):
        h = self.recurrent(x, edge_index, edge_weight)
        h = F.relu(h)
        h = self.linear(h)
        return h


def make_snapshots(num_snapshots, num_nodes=6, node_features=4):
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    return [SimpleNamespace(x=torch.randn(num_nodes, node_features), edge_index=edge_index,
                            edge_attr=torch.rand(6), y=torch.randn(num_nodes, 1))
            for _ in range(num_snapshots)]


if __name__ == "__main__":
    train_dataset = make_snapshots(5)
    model = RecurrentGCN(node_features = 4)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model.train()
    for epoch in range(5):
        cost = 0
        for time, snapshot in enumerate(train_dataset):
            y_hat = model(snapshot.x, snapshot.edge_index, snapshot.edge_attr)
            cost = cost + torch.mean((y_hat-snapshot.y)**2)
        cost = cost / (time+1)
        cost.backward()
        optimizer.step()
        optimizer.zero_grad()
        print("epoch {} MSE: {:.4f}".format(epoch, cost.item()))
