#!/bin/bash
# call 1 (ninth session): rotary kernels that share table rows across up to eight heads a thread
# (LOOM_CUDA_ROTARY_ROWS=1 is the one-row-a-thread kernel before). In order: the CUDA kernel tests,
# the fixtures' step-0 gradients, then llama-1b: 12 steps with 1 and 8 rows a thread in turn
# (1, 8, 1, 8), and the per-opcode profile of steps 2-5 with 1, 2, 4 and 8. Results in $OUT/r.tgz.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; rm -rf $R; mkdir -p $R; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call1: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
pack() { tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee $R/gpu.txt
mkdir -p /tmp/s/llama-1b; timeout 300 python3 bench/gpu/export_model.py llama-1b /tmp/s/llama-1b > $R/export-llama-1b.txt 2>&1 &
F='CudaBackend.*:Norm.*:CudaMixedDtype.*:CudnnAttention.*:SequenceSharding.Cuda*:CudaFp8.*:CudaFp8Amax.*:GemmTuning.*:GemmStaging.*:CudaStep*:GradientError*:CertifiedActivations.*'
timeout 150 $B/unittests/loom-unittests --gtest_filter="$F" > $R/unit.txt 2>&1
grep -hE "^\[  (PASSED|FAILED)|FAILED  \]" $R/unit.txt | head -20; stamp unit
for m in llama qwen2 gpt2; do
  $LOOM train $FIX/$m.dynamic.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 1 \
    --batching fixture --init-weights $FIX/$m.init.safetensors --expect-grads $FIX/$m.grads0.npz > $R/grads-$m.txt 2>&1
  echo "grads-$m: exit $? $(grep -E 'step-0 gradients' $R/grads-$m.txt)"
done
stamp parity; pack
wait
for rows in 1 8 1 8; do
  LOOM_CUDA_ROTARY_ROWS=$rows timeout 90 $LOOM train \
    /tmp/s/llama-1b/model.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 2048 --steps 12 \
    --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 --log $R/ab-$rows.jsonl > $R/ab-$rows.txt 2>&1
  echo "rows=$rows: $(grep -E '^step ' $R/ab-$rows.txt | awk '{printf "%s ", $NF}')"
done
python3 - $R <<'PY'
import json, sys
for f in ('1', '8'):
    steps = [json.loads(l) for l in open(f'{sys.argv[1]}/ab-{f}.jsonl')]
    w = [s for s in steps if 3 <= s['step'] <= 10]
    print(f'rows={f}: steps 3-10 of the last run {8192 * len(w) / sum(s["step_s"] for s in w):.0f} tokens/s, losses {[round(s["loss"], 6) for s in steps[-3:]]}')
PY
stamp ab; pack
for rows in 1 2 4 8; do
  LOOM_CUDA_ROTARY_ROWS=$rows LOOM_CUDA_PROFILE=1 LOOM_CUDA_PROFILE_FROM=2 \
    timeout 90 $LOOM train /tmp/s/llama-1b/model.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 \
    --seq 2048 --steps 6 --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 > $R/profile-$rows.txt 2>&1
  echo "rows=$rows:"; grep -E "per run in kernels|^  rotary" $R/profile-$rows.txt; grep -E "  rotary" $R/profile-$rows.txt | grep "\->"
done
stamp done; pack
