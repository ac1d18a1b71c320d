#!/usr/bin/env bash
# Builds examples/data/loom-text.u16.bin: a byte-level token stream (uint16
# little-endian, one token per byte, the same encoding as
# test/fixtures/corpus.u16.bin) of about 1 MiB of text, for runs long enough
# to memorize the 35 KB fixture corpus (a 200-step run of B=4, T=2048 reads
# ~0.8 MB of distinct window starts).
#
#   scripts/make-text-corpus.sh [COMMIT] [OUT]      (defaults: 859d85d, the file above)
#
# The text is this repository's own, at COMMIT, so it is Apache-2.0 like the
# rest: every Markdown file (prose), then the C++/CUDA/ODS sources of the
# compiler and runtime, in path order, cut at 1 MiB. A pinned commit makes
# the file reproducible bit for bit.
set -euo pipefail
cd "$(dirname "$0")/.."
COMMIT=${1:-859d85d}
OUT=${2:-examples/data/loom-text.u16.bin}
LIMIT=$((1024 * 1024))
tmp=$(mktemp)
trap 'rm -f "$tmp" "$OUT.tmp"' EXIT
{
  git ls-tree -r --name-only "$COMMIT" | grep -E '\.md$' | sort
  git ls-tree -r --name-only "$COMMIT" -- runtime compiler passes planner codegen frontends ir |
    grep -E '\.(cpp|h|cu|td)$' | sort
} | while read -r path; do
  git show "$COMMIT:$path"
  printf '\n'
done > "$tmp"
python3 - "$tmp" "$OUT.tmp" "$LIMIT" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()[: int(sys.argv[3])]
out = bytearray()
for b in data:
    out += bytes((b, 0))  # uint16 little-endian, one token per byte
open(sys.argv[2], "wb").write(out)
PY
mv "$OUT.tmp" "$OUT"
echo "wrote $OUT: $(( $(stat -c %s "$OUT") / 2 )) tokens from $COMMIT"
