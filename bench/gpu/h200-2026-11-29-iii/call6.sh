#!/bin/bash
# call 6 (thirteenth session): gpu-test's simulated-rank rows on the head (programs with
# collectives: no AdamW groups, no joins, but every kernel's FloatOut changed): every plan's ranks
# on the one GPU against the one-rank CUDA run (loom verify --backend cuda), fp32, 20 steps, llama
# then qwen2.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; rm -rf $R; mkdir -p $R; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call6: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
pack() { tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz; }
for m in llama qwen2; do
  timeout 80 $LOOM verify $FIX/$m.dynamic.onnx --plans 1 dp_replicate=2 dp_shard=2 tp=2 dp_replicate=2,dp_shard=2 dp_shard=2,tp=2 dp_shard=4 \
    --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 20 --batching fixture --warmup 5 \
    --init-weights $FIX/$m.init.safetensors --backend cuda --json $R/spmd-$m.json --max-loss-rel 1e-5 --max-grad-rel 1e-5 \
    > $R/spmd-$m.txt 2>&1
  echo "spmd-$m-cuda: exit $? $(grep -E '^(PASS|FAIL)' $R/spmd-$m.txt | cut -c1-100 | tr '\n' ';')"
  stamp $m; pack
done
