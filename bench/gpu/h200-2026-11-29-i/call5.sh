#!/bin/bash
# call 5 (eleventh session): how many of cuBLASLt's heuristic algorithms compete for each GEMM
# (LOOM_GEMM_CANDIDATES, 8 by default): llama-1b's per-opcode profile with 8 and with 32, in turn,
# then 12-step tokens/s the same way.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 LOOM_GEMM_TUNING_FILE=/tmp/tuning.tsv
R=/tmp/r5; rm -rf $R; mkdir -p $R; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call5: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
pack() { cp /tmp/tuning.tsv $R/ 2>/dev/null; tar czf $OUT/r.tgz -C /tmp r5; }
mkdir -p /tmp/s/llama-1b; (timeout 300 python3 bench/gpu/export_model.py llama-1b /tmp/s/llama-1b > $R/export-llama-1b.txt 2>&1) &
timeout 100 $B/unittests/loom-unittests --gtest_filter='GemmTuning.*:GemmStaging.*:CudaBackend.MatMul*' > $R/unit.txt 2>&1
grep -hE "^\[  (PASSED|FAILED)|FAILED  \]" $R/unit.txt
wait; stamp export
for n in 8 32 8 32; do
  LOOM_GEMM_CANDIDATES=$n LOOM_CUDA_PROFILE=1 LOOM_CUDA_PROFILE_FROM=2 timeout 150 $LOOM train /tmp/s/llama-1b/model.onnx \
    --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 2048 --steps 6 --precision bf16 --lr 1e-4 --warmup 0 \
    --print-every 1 > $R/profile-$n.txt 2>&1
  echo "candidates $n: $(grep -E 'per run in kernels' $R/profile-$n.txt | cut -c1-80) | $(grep -E 'GEMMs:' $R/profile-$n.txt)"
  pack
done
stamp profiles
for n in 8 32 8 32; do
  LOOM_GEMM_CANDIDATES=$n timeout 120 $LOOM train /tmp/s/llama-1b/model.onnx --backend cuda --data $FIX/corpus.u16.bin \
    --batch 4 --seq 2048 --steps 12 --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 \
    --log $R/ab-$n.jsonl > $R/ab-$n.txt 2>&1
  echo "candidates $n: $(grep -E '^step ' $R/ab-$n.txt | awk '{printf "%s ", $NF}')"
  python3 -c "
import json; s=[json.loads(l) for l in open('$R/ab-$n.jsonl')]; w=[x for x in s if 3<=x['step']<=10]
print('  steps 3-10: %.0f tokens/s' % (8192*len(w)/sum(x['step_s'] for x in w)))"
done
stamp done; pack
