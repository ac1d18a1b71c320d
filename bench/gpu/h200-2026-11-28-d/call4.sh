#!/bin/bash
# call 4 (the device time left, ~9 minutes): make gpu-test's sharded rows on simulated ranks on
# the GPU with this session's kernels and the gradient norm in one instruction (7 plans x 3
# models against one rank, and llama's cp / tp sequence-parallel plans), then issue 16's B=20
# comparison: torch.compile with torchtitan's selective checkpointing, loom --ac selective, and
# loom --ac budget at PyTorch's memory.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; mkdir -p $R; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call4: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
pack() { tar czf $OUT/r.tgz -C /tmp r; }
mkdir -p /tmp/s/llama-1b; [ -f /tmp/s/llama-1b/model.onnx ] || timeout 200 python3 bench/gpu/export_model.py llama-1b /tmp/s/llama-1b > $R/export.txt 2>&1 &
for m in llama qwen2 gpt2; do
  timeout 100 $LOOM verify $FIX/$m.dynamic.onnx --plans 1 dp_replicate=2 dp_shard=2 tp=2 dp_replicate=2,dp_shard=2 dp_shard=2,tp=2 dp_shard=4 \
    --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 20 --batching fixture --warmup 5 \
    --init-weights $FIX/$m.init.safetensors --backend cuda --json $R/spmd-$m.json --max-loss-rel 1e-5 \
    --max-grad-rel 1e-5 > $R/spmd-$m.log 2>&1
  echo "spmd-$m-cuda: exit $? $(python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))['plans']
print('%d plans; worst relative loss %.2e, worst step-0 gradient %.2e' % (len(r), max(p['max_rel_loss_diff'] for p in r), max(p['worst_grad_rel_l2'] for p in r)))" $R/spmd-$m.json 2>&1)"
done
timeout 100 $LOOM verify $FIX/llama.dynamic.onnx --plans 1 cp=2 cp=2,cp_rotate=ring tp=2 tp=4 --data $FIX/corpus.u16.bin --batch 4 \
  --seq 64 --steps 20 --batching fixture --warmup 5 --init-weights $FIX/llama.init.safetensors \
  --backend cuda --json $R/seqpar-llama.json --max-loss-rel 1e-5 --max-grad-rel 1e-5 > $R/seqpar-llama.log 2>&1
echo "seqpar-llama-cuda: exit $?"; stamp spmd; pack
wait
timeout 200 python3 bench/gpu/torch_ac_bench.py 20 2048 --policies selective --steps 6 > $R/torch-b20.txt 2>&1
grep '^{' $R/torch-b20.txt | cut -c1-400; stamp torch; pack
GIB=$(python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
sel = [r for r in rows if r['policy'] == 'selective' and not r['oom']]
print(sel[0]['peak_mem_gib'] if sel else '')" $R/torch-b20.txt)
for run in selective budget; do
  extra=(--ac $run); [ $run = budget ] && extra=(--ac budget --ac-memory-budget ${GIB:-104})
  timeout 100 $LOOM train /tmp/s/llama-1b/model.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 20 --seq 2048 \
    --steps 6 --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 "${extra[@]}" > $R/loom-b20-$run.txt 2>&1
  echo "loom B=20 --ac $run: exit $? $(grep -E 'device memory:' $R/loom-b20-$run.txt) tok/s $(grep -E '^step [1-5] ' $R/loom-b20-$run.txt | awk '{print $NF}' | tr '\n' ' ')"
  pack
done
stamp done; pack
