#!/usr/bin/env bash
# Side-by-side: pinfeed with workers and prefetch on auto vs the PyTorch DataLoader's suggested
# settings (num_workers = cores, pin_memory) on the same data (autotune_torch.py).
exec bash "$(dirname "${BASH_SOURCE[0]}")/with_torch.sh" autotune_torch.py "$@"
