#!/usr/bin/env bash
# Side-by-side: pinfeed's balanced sampler vs the article's two PyTorch functions, same machine,
# same threads, same sizes (sampler_torch.py).
# Usage: bench/compare/run_sampler_compare.sh [--device cpu|cuda] [extra sampler_torch.py args]
exec bash "$(dirname "${BASH_SOURCE[0]}")/with_torch.sh" sampler_torch.py "$@"
