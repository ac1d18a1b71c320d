#!/bin/bash
# call 1: kernel tests, zoo, suite llama-1b + qwen3-1.7b
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib; export NCCL_NVLS_ENABLE=0
mkdir -p $OUT/r /tmp/loom-suite
( while sleep 10; do cp /tmp/loom-suite/*.txt /tmp/loom-suite/*.jsonl /tmp/loom-suite/*.json $OUT/r/ 2>/dev/null; done ) &
for s in llama-1b qwen3-1.7b; do
  python3 bench/gpu/export_model.py $s /tmp/loom-suite/$s > /tmp/loom-suite/export-$s.txt 2>&1 &
done
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $OUT/r/gpu.txt
$B/unittests/loom-unittests --gtest_filter='CudaBackend.*:GemmStaging.*:CudaMixed*:CudaStep*:GradientError*' > $OUT/r/unittests.txt 2>&1
tail -3 $OUT/r/unittests.txt
LOOM_GPU_TEST_OUT=/tmp/zoo bash scripts/gpu-test-zoo.sh $B > $OUT/r/zoo.txt 2>&1
tail -3 $OUT/r/zoo.txt
wait_exports() { while pgrep -f export_model.py > /dev/null; do sleep 2; done; }
wait_exports
LOOM_BENCH_PROFILE=planner/profiles/h100.calibrated.json LOOM_BENCH_CUDA_PROFILE=1 LOOM_BENCH_DIR=/tmp/loom-suite LOOM_BENCH_STEPS=6 \
  bash bench/gpu/suite.sh $B llama-1b qwen3-1.7b > $OUT/r/suite.txt 2>&1
cp /tmp/loom-suite/*.txt /tmp/loom-suite/*.jsonl /tmp/loom-suite/*.json $OUT/r/ 2>/dev/null
grep -E "suite:|ratio" $OUT/r/suite.txt | tail -12
