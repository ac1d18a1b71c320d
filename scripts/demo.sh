#!/usr/bin/env bash
# `make demo`: the shipped tiny Llama (a real torch.onnx export) goes through
# every layer of loom: import and fusion, a compiled forward pass checked
# against PyTorch, then training on the shipped corpus (forward, backward,
# AdamW, all in one compiled step) with the loss falling.
set -euo pipefail
BUILD=${1:-build}
LOOM="$BUILD/tools/loom/loom"
MODEL=test/fixtures/llama.dynamic.onnx
CORPUS=test/fixtures/corpus.u16.bin
OUT="$BUILD/demo"
mkdir -p "$OUT"

echo "== loom demo: a tiny Llama (2 layers, hidden 64, 4 heads over 2 KV heads, vocab 256)"
echo "   exported from PyTorch with torch.onnx (dynamic batch and sequence): $MODEL"
echo "   corpus: $CORPUS ($(( $(stat -c %s $CORPUS) / 2 )) byte-level tokens)"
echo
echo "== 1. import into the loom dialect, specialized to batch 4 x seq 64, and fuse"
"$LOOM" import "$MODEL" --batch 4 --seq 64 > "$OUT/imported.mlir"
"$LOOM" import "$MODEL" --batch 4 --seq 64 --fuse > "$OUT/fused.mlir"
count() { grep -c "$1" "$2" || true; }
echo "   as exported: $(grep -c ' = loom\.' "$OUT/imported.mlir") ops;" \
     "after fusion: $(grep -c ' = loom\.' "$OUT/fused.mlir") ops" \
     "($(count 'loom.attention' "$OUT/fused.mlir") attention, $(count 'loom.rms_norm' "$OUT/fused.mlir") rms_norm," \
     "$(count 'loom.rotary' "$OUT/fused.mlir") rotary, $(count 'loom.silu' "$OUT/fused.mlir") silu)"
echo
echo "== 2. compile the forward pass to an artifact, run batch 0 on the CPU backend, compare with PyTorch (fp64)"
"$LOOM" compile "$MODEL" --batch 4 --seq 64 -o "$OUT/tiny-llama.loomprog" | sed 's/^/   /'
"$LOOM" eval "$OUT/tiny-llama.loomprog" --data "$CORPUS" --batch 4 --seq 64 \
  --expect-logits test/fixtures/llama.logits0.npy | sed 's/^/   /'
echo
# Train on the GPU when this machine has one and loom was built with CUDA.
BACKEND=cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
   grep -q "^LOOM_CUDA_BACKEND:INTERNAL=ON" "$BUILD/CMakeCache.txt" 2>/dev/null; then
  BACKEND=cuda
fi
echo "== 3. train it on the $BACKEND backend: 200 steps, batch 8 x seq 64, AdamW (lr 3e-3, warmup 10, cosine), clip 1.0"
rm -rf "$OUT/checkpoints"
"$LOOM" train "$MODEL" --backend "$BACKEND" --data "$CORPUS" --batch 8 --seq 64 --steps 200 --lr 3e-3 --warmup 10 \
  --schedule cosine --min-lr-ratio 0.1 --init-weights test/fixtures/llama.init.safetensors \
  --print-every 20 --log "$OUT/train.jsonl" --checkpoint-dir "$OUT/checkpoints" \
  --checkpoint-every 100 --export-weights "$OUT/tiny-llama.trained.safetensors" | sed 's/^/   /'
echo
echo "   per-step log: $OUT/train.jsonl; checkpoints: $OUT/checkpoints;" \
     "trained weights (HF names): $OUT/tiny-llama.trained.safetensors"
echo "   (uniform guessing over 256 tokens would score ln 256 = 5.55)"
echo
echo "Next: 'loom --help', 'loom train --help'; docs/architecture.md explains the pipeline."
