#!/bin/bash
# call 3: bits tests + memory-bound timings for both kernel variants; suite llama-1b, gpt2-large, qwen3-1.7b (new kernels)
set -u
tar xJf .carry/gpu.tar.xz -C .carry; tar xJf .carry/gpu-old.tar.xz -C .carry; B=.carry/gpu; O=.carry/gpu-old
export LD_LIBRARY_PATH=$PWD/$B/lib; export NCCL_NVLS_ENABLE=0
R=/tmp/r; mkdir -p $R /tmp/loom-suite; T0=$(date +%s)
stamp() { echo "call3: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
( while sleep 15; do cp /tmp/loom-suite/*.txt /tmp/loom-suite/*.jsonl /tmp/loom-suite/*.json $R/ 2>/dev/null; tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz; done ) &
for s in llama-1b gpt2-large qwen3-1.7b; do
  python3 bench/gpu/export_model.py $s /tmp/loom-suite/$s > /tmp/loom-suite/export-$s.txt 2>&1 &
done
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $R/gpu.txt
for v in new old; do D=$B; [ $v = old ] && D=$O
  LD_LIBRARY_PATH=$PWD/$D/lib $D/unittests/loom-unittests --gtest_filter='CudaBackend.Bf16Activations*' > $R/bits-$v.txt 2>&1
  echo "bits $v: $(grep -E '^\[  (PASSED|FAILED)' $R/bits-$v.txt | head -2 | tr '\n' ' ')"; grep -E "differ" $R/bits-$v.txt | head -5
done
$B/unittests/loom-unittests --gtest_filter='CudaBackend.*:GemmStaging.*:CudaMixed*:CudaStep*:GradientError*:-CudaBackend.Bf16Activations*' > $R/unittests.txt 2>&1
tail -1 $R/unittests.txt; stamp tests
for v in new old; do D=$B; [ $v = old ] && D=$O
  LD_LIBRARY_PATH=$PWD/$D/lib $D/tools/loom/loom calibrate --memory-only --reps 5 >> $R/calibrate-mem-$v.txt 2>&1
  echo "== $v"; grep -E "swiglu|gelu|activation|copy" $R/calibrate-mem-$v.txt | tail -6
done
stamp calibrate
while pgrep -f export_model.py > /dev/null; do sleep 2; done
stamp exports
LOOM_BENCH_PROFILE=planner/profiles/h100.calibrated.json LOOM_BENCH_CUDA_PROFILE=0 LOOM_BENCH_DIR=/tmp/loom-suite LOOM_BENCH_STEPS=6 \
  bash bench/gpu/suite.sh $B llama-1b gpt2-large qwen3-1.7b > $R/suite.txt 2>&1
stamp suite
cp /tmp/loom-suite/*.txt /tmp/loom-suite/*.jsonl /tmp/loom-suite/*.json $R/ 2>/dev/null
tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz
grep -E "suite:|ratio" $R/suite.txt | tail -12
