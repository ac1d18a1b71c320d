#!/bin/bash
# call 1: the CUDA kernel tests, then the four-shape suite in one call with tokens-major attention
# (loom-fold-attention-transposes, the default), PyTorch compiling from the inductor caches an
# earlier call saved (.carry/ind.tar.xz.00, made on an H100; whatever it misses PyTorch compiles
# and the call returns the refreshed caches as ind.tar.xz.00).
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; W=/tmp/loom-suite; mkdir -p $R $W; T0=$(date +%s)
stamp() { echo "call1: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
( while sleep 15; do cp $W/*.txt $W/*.json $W/*.jsonl $R/ 2>/dev/null; tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz; done ) &
nvidia-smi -L > $R/gpu.txt
timeout 120 $B/unittests/loom-unittests --gtest_filter='CudaBackend.*:GemmStaging.*:CudaMixed*:CudaStep*:GradientError*:CudaFp8Amax.*' > $R/unittests.txt 2>&1
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/unittests.txt | head; stamp tests
grep -q "^\[  FAILED" $R/unittests.txt && { tar czf $OUT/r.tgz -C /tmp r; grep -B5 "FAILED  \]" $R/unittests.txt | head -40; exit 1; }
LOOM_BENCH_PROFILE=planner/profiles/h200.calibrated.json LOOM_BENCH_TORCH_CACHE=.carry/ind LOOM_BENCH_EXPORT_JOBS=4 LOOM_BENCH_CUDA_PROFILE=0 LOOM_BENCH_STEPS=6 LOOM_BENCH_DIR=$W \
  timeout 540 bash bench/gpu/suite.sh $B llama-1b gpt2-large qwen3-1.7b qwen2.5-1.5b > $R/suite.txt 2>&1
stamp suite
cp $W/*.txt $W/*.json $W/*.jsonl $R/ 2>/dev/null
kill %1 2>/dev/null
tar cf - -C /tmp/loom-torch-cache inductor-cache 2>/dev/null | xz -1 > $OUT/ind.tar.xz.00
tar czf $OUT/r.tgz -C /tmp r
grep -vE "^\s*$" $R/suite.txt | tail -30
