#!/bin/bash
# call 4: cuBLASLt's first eight heuristic algorithms timed on llama-1b's 16 GEMM shapes
# (gemm_algos_bench.cu, built here).
set -u
R=$OUT/r; mkdir -p $R
NV=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
$NV -O3 -arch=sm_90 -std=c++17 bench/gpu/gemm_algos_bench.cu -lcublasLt -o /tmp/gb > $R/nvcc.txt 2>&1 || { cat $R/nvcc.txt; exit 1; }
/tmp/gb 2>&1 | tee $R/gemm-algos.txt
