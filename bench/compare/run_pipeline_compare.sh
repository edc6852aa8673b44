#!/usr/bin/env bash
# Side-by-side: pinfeed vs the PyTorch DataLoader on the same workloads, workers and images
# (pipeline_torch.py).
exec bash "$(dirname "${BASH_SOURCE[0]}")/with_torch.sh" pipeline_torch.py "$@"
