#!/bin/bash
# call 1 (seventh session): why later loom steps ran slower on llama-1b (issue 19 check 2).
# The CUDA kernel tests first (three commits since the last GPU run were compiled only), then
# llama-1b 16 steps on the fixture corpus with nvidia-smi's SM clock, power, temperature and
# throttle reasons logged every 50 ms; the same on the 1 MiB text corpus (its windows do not
# repeat); the per-opcode profile of steps 2-5 and of steps 6-9. Results in $OUT/r.tgz.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; mkdir -p $R; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call1: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
pack() { tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee $R/gpu.txt
mkdir -p /tmp/s/llama-1b; timeout 300 python3 bench/gpu/export_model.py llama-1b /tmp/s/llama-1b > $R/export-llama-1b.txt 2>&1 &
F='CudaBackend.*:CudaMixedDtype.*:CudnnAttention.*:SequenceSharding.Cuda*:CudaFp8.*:CudaFp8Amax.*:GemmTuning.*:GemmStaging.*:CudaStep*:GradientError*'
timeout 150 $B/unittests/loom-unittests --gtest_filter="$F" > $R/unit.txt 2>&1
grep -hE "^\[  (PASSED|FAILED)|FAILED  \]" $R/unit.txt | head -20; stamp unit; pack
wait
run() { # NAME DATA STEPS [env...]
  local name=$1 data=$2 steps=$3; shift 3
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv,noheader -lms 50 > $R/clocks-$name.csv 2>&1 & local smi=$!
  sleep 1; date +%s.%N > $R/start-$name.txt
  env "$@" timeout 120 $LOOM train /tmp/s/llama-1b/model.onnx --backend cuda --data $data --batch 4 --seq 2048 \
    --steps $steps --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 --log $R/$name.jsonl > $R/$name.txt 2>&1
  date +%s.%N > $R/end-$name.txt; sleep 1; kill $smi
  echo "$name: $(grep -E '^step ' $R/$name.txt | awk '{printf "%s:%s ", $2, $NF}')"
}
run corpus $FIX/corpus.u16.bin 16 LOOM_X=0
run text examples/data/loom-text.u16.bin 16 LOOM_X=0
stamp runs; pack
for from in 2 6; do
  LOOM_CUDA_PROFILE=1 LOOM_CUDA_PROFILE_FROM=$from timeout 120 $LOOM train /tmp/s/llama-1b/model.onnx --backend cuda \
    --data $FIX/corpus.u16.bin --batch 4 --seq 2048 --steps $((from + 4)) --precision bf16 --lr 1e-4 --warmup 0 \
    --print-every 1 > $R/profile-from$from.txt 2>&1
  grep -A26 "opcode " $R/profile-from$from.txt | head -28
done
stamp profiles; pack
run corpus-again $FIX/corpus.u16.bin 16 LOOM_X=0
stamp done; pack
