#!/bin/bash
# call 2: activation bits test (diagnostic), kernel tests, memory-bound calibration, suite gpt2-large + qwen2.5-1.5b
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib; export NCCL_NVLS_ENABLE=0
R=/tmp/r; mkdir -p $R /tmp/loom-suite
( while sleep 15; do cp /tmp/loom-suite/*.txt /tmp/loom-suite/*.jsonl /tmp/loom-suite/*.json $R/ 2>/dev/null; tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz; done ) &
for s in gpt2-large qwen2.5-1.5b; do
  python3 bench/gpu/export_model.py $s /tmp/loom-suite/$s > /tmp/loom-suite/export-$s.txt 2>&1 &
done
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $R/gpu.txt
$B/unittests/loom-unittests --gtest_filter='CudaBackend.Bf16Activations*' > $R/bits.txt 2>&1
grep -E "differ|\[ *(OK|FAILED) *\]" $R/bits.txt | head -30
$B/unittests/loom-unittests --gtest_filter='CudaBackend.*:GemmStaging.*:CudaMixed*:CudaStep*:GradientError*:-CudaBackend.Bf16Activations*' > $R/unittests.txt 2>&1
tail -3 $R/unittests.txt
$B/tools/loom/loom calibrate --memory-only --reps 5 > $R/calibrate-mem.txt 2>&1
grep -E "swiglu|gelu|activation|copy" $R/calibrate-mem.txt
while pgrep -f export_model.py > /dev/null; do sleep 2; done
LOOM_BENCH_PROFILE=planner/profiles/h100.calibrated.json LOOM_BENCH_CUDA_PROFILE=1 LOOM_BENCH_DIR=/tmp/loom-suite LOOM_BENCH_STEPS=6 \
  bash bench/gpu/suite.sh $B gpt2-large qwen2.5-1.5b > $R/suite.txt 2>&1
cp /tmp/loom-suite/*.txt /tmp/loom-suite/*.jsonl /tmp/loom-suite/*.json $R/ 2>/dev/null
tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz
grep -E "suite:|ratio" $R/suite.txt | tail -12
