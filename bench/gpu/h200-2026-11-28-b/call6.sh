#!/bin/bash
# call 6: the final bundle (GEMM tuning timed in the empty arena): the CUDA kernel tests, again in a
# second process (the table read back), and the zoo's fp32/bf16 curves on CUDA.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R; T0=$(date +%s)
F='GemmTuning.*:CudaBackend.*:GemmStaging.*:CudaMixed*:CudaStep*:GradientError*:CudaFp8Amax.*'
timeout 60 $B/unittests/loom-unittests --gtest_filter="$F" > $R/unittests.txt 2>&1
timeout 30 $B/unittests/loom-unittests --gtest_filter="CudaBackend.GemmTuning*:CudaBackend.*Gemm*:CudaBackend.MatMul*" > $R/unittests-second.txt 2>&1
grep -hE "^\[  (PASSED|FAILED)|FAILED  \]" $R/unittests.txt $R/unittests-second.txt
echo "tests at $(( $(date +%s) - T0 )) s"; wc -l ~/.cache/loom/gemm-tuning.tsv
LOOM_GPU_TEST_OUT=/tmp/zoo LOOM_GPU_TEST_ZOO_ROWS="bf16 fp32" timeout 70 bash scripts/gpu-test-zoo.sh $B > $R/zoo.txt 2>&1
grep -E "FAIL|passed" $R/zoo.txt | tail -5; echo "zoo at $(( $(date +%s) - T0 )) s"
