#!/bin/bash
# call 4: the model zoo's CUDA curves (fp32 and bf16 rows, 23 families) on the tokens-major
# attention, as many as fit (scripts/gpu-test-zoo.sh; the spmd rows left out for time).
set -u
tar xJf .carry/gpu.tar.xz -C .carry
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 LOOM_GPU_TEST_OUT=/tmp/zoo LOOM_GPU_TEST_ZOO_ROWS="bf16 fp32"
mkdir -p /tmp/zoo
( while sleep 10; do cp /tmp/zoo.txt $OUT/zoo.txt 2>/dev/null; done ) &
timeout 170 bash scripts/gpu-test-zoo.sh .carry/gpu > /tmp/zoo.txt 2>&1
cp /tmp/zoo.txt $OUT/zoo.txt
grep -c PASS /tmp/zoo.txt; grep -v PASS /tmp/zoo.txt | head -20
