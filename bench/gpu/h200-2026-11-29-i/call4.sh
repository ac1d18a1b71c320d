#!/bin/bash
# call 4 (eleventh session): the four-shape suite beside torch.compile on call 3's bundle (the
# streaming norm gradients, e875344), both sides timed past the power transient: 20 warm-up steps,
# then tokens/s over the next 10 (LOOM_BENCH_WARMUP=20 LOOM_BENCH_TIMED=10), PyTorch on the same
# corpus windows, priced with the H200 profile; nvidia-smi's SM clock, power and throttle reasons
# every 100 ms. Results in $OUT/r.tgz, refreshed every 15 s so a cut call still returns them.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r4; W=/tmp/loom-suite; mkdir -p $R $W; T0=$(date +%s)
stamp() { echo "call4: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader -lms 100 > $R/clocks.csv 2>&1 &
( while sleep 15; do cp $W/*.txt $W/*.json $W/*.jsonl $R/ 2>/dev/null; tar czf $OUT/r.tgz.tmp -C /tmp r4 && mv $OUT/r.tgz.tmp $OUT/r.tgz; done ) &
LOOM_BENCH_WARMUP=20 LOOM_BENCH_TIMED=10 \
LOOM_BENCH_PROFILE=planner/profiles/h200.calibrated.json LOOM_BENCH_TORCH_CACHE=.carry/ind-h200.tar.xz \
  LOOM_BENCH_EXPORT_JOBS=4 LOOM_BENCH_CUDA_PROFILE=0 LOOM_BENCH_DIR=$W \
  timeout 560 bash bench/gpu/suite.sh $B llama-1b qwen2.5-1.5b qwen3-1.7b gpt2-large > $R/suite.txt 2>&1
stamp suite
kill %1 %2 2>/dev/null
cp $W/*.txt $W/*.json $W/*.jsonl $R/ 2>/dev/null
tar czf $OUT/r.tgz -C /tmp r4
grep -vE "^\s*$" $R/suite.txt | tail -16
