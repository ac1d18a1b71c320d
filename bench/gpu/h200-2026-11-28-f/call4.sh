#!/bin/bash
# call 4 (eighth session): issue 16's B=20 comparison with this session's kernels: torch.compile
# with torchtitan's selective checkpointing, loom --ac selective and loom --ac budget at PyTorch's
# memory; then loom --ac selective's per-opcode profile at B=20 (how much of its step the GEMMs and
# attention take, against the step 1.15x PyTorch would need), and the suite's llama-1b row again
# (its spread). Results in $OUT/r.tgz.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; W=/tmp/loom-suite; mkdir -p $R $W; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call4: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
pack() { cp $W/*.txt $W/*.json $W/*.jsonl $R/ 2>/dev/null; tar czf $OUT/r.tgz -C /tmp r; }
mkdir -p $W/llama-1b; timeout 300 python3 bench/gpu/export_model.py llama-1b $W/llama-1b > $R/export-llama-1b.txt 2>&1 &
timeout 200 python3 bench/gpu/torch_ac_bench.py 20 2048 --policies selective --steps 6 > $R/torch-b20.txt 2>&1
grep '^{' $R/torch-b20.txt | cut -c1-400; stamp torch; pack
wait
GIB=$(python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
sel = [r for r in rows if r['policy'] == 'selective' and not r['oom']]
print(sel[0]['peak_mem_gib'] if sel else '')" $R/torch-b20.txt)
for run in selective budget; do
  extra=(--ac $run); [ $run = budget ] && extra=(--ac budget --ac-memory-budget ${GIB:-104})
  timeout 100 $LOOM train $W/llama-1b/model.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 20 --seq 2048 \
    --steps 6 --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 "${extra[@]}" > $R/loom-b20-$run.txt 2>&1
  echo "loom B=20 --ac $run: exit $? $(grep -E 'device memory:' $R/loom-b20-$run.txt) tok/s $(grep -E '^step [1-5] ' $R/loom-b20-$run.txt | awk '{print $NF}' | tr '\n' ' ')"
  pack
done
stamp loom-b20
LOOM_CUDA_PROFILE=1 LOOM_CUDA_PROFILE_FROM=2 timeout 120 $LOOM train $W/llama-1b/model.onnx --backend cuda \
  --data $FIX/corpus.u16.bin --batch 20 --seq 2048 --steps 4 --precision bf16 --lr 1e-4 --warmup 0 \
  --print-every 1 --ac selective > $R/profile-b20-selective.txt 2>&1
grep -A8 "opcode " $R/profile-b20-selective.txt | head -10; stamp profile; pack
LOOM_BENCH_PROFILE=planner/profiles/h200.calibrated.json LOOM_BENCH_TORCH_CACHE=.carry/ind-h200.tar.xz \
  LOOM_BENCH_CUDA_PROFILE=0 LOOM_BENCH_DIR=$W timeout 200 bash bench/gpu/suite.sh $B llama-1b > $R/suite.txt 2>&1
grep -E "^\| llama-1b" $R/suite.txt; stamp suite; pack
