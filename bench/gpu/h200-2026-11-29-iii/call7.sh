#!/bin/bash
# call 7 (thirteenth session): the rest of gpu-test's simulated-rank rows on the head: gpt2's
# data/tensor-parallel plans, and context, sequence and loss parallelism (seqpar) for llama, qwen2
# and gpt2, each plan's ranks on the one GPU against the one-rank CUDA run, fp32, 20 steps.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; rm -rf $R; mkdir -p $R; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call7: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
pack() { tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz; }
verify() { # tag model plans...
  local tag=$1 m=$2; shift 2
  timeout 60 $LOOM verify $FIX/$m.dynamic.onnx --plans "$@" \
    --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 20 --batching fixture --warmup 5 \
    --init-weights $FIX/$m.init.safetensors --backend cuda --json $R/$tag-$m.json --max-loss-rel 1e-5 --max-grad-rel 1e-5 \
    > $R/$tag-$m.txt 2>&1
  echo "$tag-$m-cuda: exit $? $(grep -cE '^PASS' $R/$tag-$m.txt) PASS, $(grep -cE '^FAIL' $R/$tag-$m.txt) FAIL $(grep -E '^FAIL|error' $R/$tag-$m.txt | head -2 | cut -c1-120 | tr '\n' ';')"
}
verify spmd gpt2 1 dp_replicate=2 dp_shard=2 tp=2 dp_replicate=2,dp_shard=2 dp_shard=2,tp=2 dp_shard=4
for m in llama qwen2 gpt2; do
  verify seqpar $m 1 cp=2 cp=2,cp_rotate=ring cp=4 cp=4,cp_rotate=ring cp=2,tp=2 tp=2 tp=4
done
stamp done; pack
