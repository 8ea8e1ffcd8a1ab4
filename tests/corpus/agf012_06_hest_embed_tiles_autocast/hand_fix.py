import numpy as np
import torch
import torch.nn as nn


def post_collate_fn(batch):
    """Post collate function to clean up batch."""
    if batch["imgs"].dim() == 5:
        assert batch["imgs"].size(0) == 1
        batch["imgs"] = batch["imgs"].squeeze(0)
    if batch["coords"].dim() == 3:
        assert batch["coords"].size(0) == 1
        batch["coords"] = batch["coords"].squeeze(0)
    return batch


def embed_tiles(dataloader, model: torch.nn.Module, device: str, precision):
    """Extract embeddings from tiles using encoder."""
    model.eval()
    all_embeddings = []
    all_coords = []
    for batch_idx, batch in enumerate(dataloader):
        batch = post_collate_fn(batch)
        imgs = batch["imgs"].to(device).float()
        with torch.inference_mode(), torch.amp.autocast("cuda", dtype=precision):
            embeddings = model(imgs)
        all_embeddings.append(embeddings.cpu().numpy())
        all_coords.append(batch["coords"].numpy())
    return np.concatenate(all_embeddings), np.concatenate(all_coords)


if __name__ == "__main__":
    encoder = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    loader = [{"imgs": torch.rand(1, 2, 3, 8, 8), "coords": torch.randint(0, 100, (1, 2, 2))} for _ in range(3)]
    embeddings, coords = embed_tiles(loader, encoder, "cpu", torch.float16)
    print(embeddings.shape, coords.shape, round(float(embeddings.sum()), 4))
