#!/bin/bash
# call 1: where swiglu_grad and AdamW lose time (elementwise_bench.cu, built here into
# .carry/eb/eb), then a full `loom calibrate` of the H200 (issue 19 check 3: the profile
# of 2026-11-23 lacks everything calibrated since).
set -u
tar xJf .carry/gpu.tar.xz -C .carry; D=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$D/lib NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R; T0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $R/gpu.txt
.carry/eb/eb 8192 8192 1e-4 2>&1 | tee $R/eb.txt
.carry/eb/eb 8192 8192 1 0 2>&1 | grep -v adamw | tee $R/eb-dy1.txt
echo "eb: $(( $(date +%s) - T0 )) s"
timeout 400 $D/tools/loom/loom calibrate --base h200 --backend cuda -o $R/h200.calibrated.json > $R/calibrate.txt 2>&1
echo "calibrate rc=$? at $(( $(date +%s) - T0 )) s"; tail -5 $R/calibrate.txt
