#!/bin/bash
# call 1 (eleventh session): the HEAD bundle's CUDA kernel tests (37002a4's launchers, not yet run
# on a GPU), then norm_bench builds with the streaming norm-gradient kernel's variants.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee $R/gpu.txt
F='CudaBackend.*:Norm.*:CudaMixedDtype.*:CudnnAttention.*:SequenceSharding.Cuda*:CudaFp8.*:CudaFp8Amax.*:GemmTuning.*:GemmStaging.*:CudaStep*:GradientError*:CertifiedActivations.*'
timeout 150 $B/unittests/loom-unittests --gtest_filter="$F" > $R/unit.txt 2>&1
grep -hE "^\[  (PASSED|FAILED)|FAILED  \]" $R/unit.txt | head -20
tar xJf .carry/nb.tar.xz -C .carry
for b in .carry/nb/nb_*; do
  for d in 2048 1536 1280 4096; do
    echo "== $(basename $b) 8192 x $d" >> $R/nb.txt
    timeout 60 $b 8192 $d >> $R/nb.txt 2>&1
  done
done
grep -E '^==|stream .* two-pass' $R/nb.txt
