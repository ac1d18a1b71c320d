#!/bin/bash
# call 4 (the device time left, ~4 minutes): sharded plans on simulated ranks on the GPU with the
# gradient sums fused into their GEMMs (make gpu-test's spmd and seqpar rows, fp32, 20 steps
# against the one-rank CUDA run), then llama-1b's step profiled per opcode while time remains.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom; R=$OUT
mkdir -p /tmp/s/llama-1b; timeout 200 python3 bench/gpu/export_model.py llama-1b /tmp/s/llama-1b > $R/export.txt 2>&1 &
for m in llama qwen2 gpt2; do
  $LOOM verify $FIX/$m.dynamic.onnx --plans 1 dp_replicate=2 dp_shard=2 tp=2 dp_replicate=2,dp_shard=2 dp_shard=2,tp=2 dp_shard=4 \
    --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 20 --batching fixture --warmup 5 \
    --init-weights $FIX/$m.init.safetensors --backend cuda --json $R/spmd-$m.json --max-loss-rel 1e-5 \
    --max-grad-rel 1e-5 > $R/spmd-$m.log 2>&1
  echo "spmd-$m-cuda: exit $? $(python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))['plans']
print('%d plans; worst relative loss %.2e, worst step-0 gradient %.2e' % (len(r), max(p['max_rel_loss_diff'] for p in r), max(p['worst_grad_rel_l2'] for p in r)))" $R/spmd-$m.json 2>&1) at $(( $(date +%s) - T0 )) s"
done
$LOOM verify $FIX/llama.dynamic.onnx --plans 1 cp=2 cp=2,cp_rotate=ring tp=2 tp=4 --data $FIX/corpus.u16.bin --batch 4 \
  --seq 64 --steps 20 --batching fixture --warmup 5 --init-weights $FIX/llama.init.safetensors \
  --backend cuda --json $R/seqpar-llama.json --max-loss-rel 1e-5 --max-grad-rel 1e-5 > $R/seqpar-llama.log 2>&1
echo "seqpar-llama-cuda: exit $? at $(( $(date +%s) - T0 )) s"
wait
[ $(( $(date +%s) - T0 )) -lt 180 ] && LOOM_CUDA_PROFILE=1 timeout $(( 235 - ($(date +%s) - T0) )) $LOOM train /tmp/s/llama-1b/model.onnx \
  --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 2048 --steps 2 --precision bf16 --lr 1e-4 --warmup 0 \
  --print-every 1 > $R/profile-llama-1b.txt 2>&1
grep -A24 "opcode " $R/profile-llama-1b.txt | head -26
echo "done at $(( $(date +%s) - T0 )) s"
