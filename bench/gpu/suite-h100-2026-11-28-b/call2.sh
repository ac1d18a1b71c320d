#!/bin/bash
# call 2: the four-shape suite in one call, PyTorch compiling from the caches call 1 brought back
# (TORCHINDUCTOR_CACHE_DIR; its timed steps run after warm-up either way), after the CUDA kernel
# tests (the suite runs only if they pass).
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
cat .carry/ind.tar.xz.* | xz -dc | tar xf - -C /tmp && export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache
R=/tmp/r; W=/tmp/loom-suite; mkdir -p $R $W; T0=$(date +%s)
stamp() { echo "call2: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
( while sleep 15; do cp $W/*.txt $W/*.json $W/*.jsonl $R/ 2>/dev/null; tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz; done ) &
du -sh /tmp/inductor-cache; stamp "cache unpacked"
timeout 120 $B/unittests/loom-unittests --gtest_filter='CudaBackend.*:GemmStaging.*:CudaMixed*:CudaStep*:GradientError*:CudaFp8Amax.*' > $R/unittests.txt 2>&1
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/unittests.txt | head; stamp tests
grep -q "^\[  FAILED" $R/unittests.txt && { tar czf $OUT/r.tgz -C /tmp r; grep -B5 "FAILED  \]" $R/unittests.txt | head -40; exit 1; }
LOOM_BENCH_EXPORT_JOBS=4 LOOM_BENCH_CUDA_PROFILE=0 LOOM_BENCH_STEPS=6 LOOM_BENCH_DIR=$W \
  bash bench/gpu/suite.sh $B qwen3-1.7b qwen2.5-1.5b gpt2-large llama-1b > $R/suite.txt 2>&1
stamp suite
cp $W/*.txt $W/*.json $W/*.jsonl $R/ 2>/dev/null
tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz
cat $R/suite.txt | grep -vE "^\s*$" | tail -30
