#!/usr/bin/env bash
# PyTorch's compile caches for bench/gpu/suite.sh, so that the four shapes fit
# one 10-minute call on the GPU machine (torch.compile takes 54-130 s a shape
# cold, 6-14 s from its caches; the timed steps run after warm-up either way):
#
#   bench/gpu/torch_cache.sh save OUTPREFIX [SHAPE...]
#       compiles each shape once (torch_suite.py SHAPE compile 2 2) into a
#       fresh TORCHINDUCTOR_CACHE_DIR and packs that folder as an xz tar in
#       15 MB pieces OUTPREFIX.00, .01, ... (the device returns files of up
#       to 16 MiB: write them under $OUT there)
#   LOOM_BENCH_TORCH_CACHE=PREFIX bench/gpu/suite.sh ...
#       suite.sh unpacks PREFIX.* and compiles from it
#
# The cache holds Inductor's generated code and Triton kernels for this GPU,
# PyTorch and driver; where it does not match, PyTorch compiles cold.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "${1:-}" = save ] || { echo "usage: $0 save OUTPREFIX [SHAPE...]" >&2; exit 2; }
OUTPREFIX=${2:?output prefix}
shift 2
SHAPES=("$@")
[ ${#SHAPES[@]} -eq 0 ] && SHAPES=(llama-1b qwen2.5-1.5b qwen3-1.7b gpt2-large)
# A fixed path, the one suite.sh unpacks to (the cache was only ever tried
# at the path it was written at).
CACHE=/tmp/loom-torch-cache/inductor-cache
rm -rf "$CACHE"
mkdir -p "$CACHE"
for s in "${SHAPES[@]}"; do
  TORCHINDUCTOR_CACHE_DIR=$CACHE python3 bench/gpu/torch_suite.py "$s" compile 2 2 | tail -1
done
tar cf - -C "$(dirname "$CACHE")" inductor-cache | xz -T8 -6 > "$OUTPREFIX.tmp"
split -b 15M -d "$OUTPREFIX.tmp" "$OUTPREFIX."
rm -f "$OUTPREFIX.tmp"
ls -l "$OUTPREFIX".*
