#!/usr/bin/env bash
# Side-by-side: pinfeed's augmentation ops and recipe vs torchvision v2 and the PyTorch DataLoader
# on the same image, JPEGs, workers and batch (augment_torch.py).
exec bash "$(dirname "${BASH_SOURCE[0]}")/with_torch.sh" augment_torch.py "$@"
