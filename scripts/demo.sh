#!/usr/bin/env bash
# `make demo`: the shipped tiny Llama (a real torch.onnx export) goes through
# every layer of loom: import, fusion, compile to an artifact, run on the CPU
# backend, and check against PyTorch's own logits.
set -euo pipefail
BUILD=${1:-build}
LOOM="$BUILD/tools/loom/loom"
MODEL=test/fixtures/llama.dynamic.onnx
CORPUS=test/fixtures/corpus.u16.bin
OUT="$BUILD/demo"
mkdir -p "$OUT"

echo "== loom demo: a tiny Llama (2 layers, hidden 64, 4 heads over 2 KV heads, vocab 256)"
echo "   exported from PyTorch with torch.onnx (dynamic batch and sequence): $MODEL"
echo
echo "== 1. import into the loom dialect, specialized to batch 4 x seq 64, and fuse"
"$LOOM" import "$MODEL" --batch 4 --seq 64 > "$OUT/imported.mlir"
"$LOOM" import "$MODEL" --batch 4 --seq 64 --fuse > "$OUT/fused.mlir"
count() { grep -c "$1" "$2" || true; }
echo "   as exported: $(grep -c ' = loom\.' "$OUT/imported.mlir") ops;" \
     "after fusion: $(grep -c ' = loom\.' "$OUT/fused.mlir") ops" \
     "($(count 'loom.attention' "$OUT/fused.mlir") attention, $(count 'loom.rms_norm' "$OUT/fused.mlir") rms_norm," \
     "$(count 'loom.rotary' "$OUT/fused.mlir") rotary, $(count 'loom.silu' "$OUT/fused.mlir") silu)"
echo "   IR: $OUT/imported.mlir, $OUT/fused.mlir"
echo
echo "== 2. compile to a runtime artifact"
"$LOOM" compile "$MODEL" --batch 4 --seq 64 -o "$OUT/tiny-llama.loomprog" | sed 's/^/   /'
echo
echo "== 3. run batch 0 of the shipped corpus on the CPU backend, compare with PyTorch (fp64)"
"$LOOM" eval "$OUT/tiny-llama.loomprog" --data "$CORPUS" --batch 4 --seq 64 \
  --expect-logits test/fixtures/llama.logits0.npy | sed 's/^/   /'
echo "   PyTorch's loss for this batch (reference.json loss0_fp64): 5.560813"
echo
echo "Next: 'loom --help'; training ('loom train') is issue 3 on the roadmap."
