#!/bin/bash
# call 1 (twelfth session): the eleventh session's review commit (036a29d) on a GPU (the CUDA
# kernel tests), a fresh `loom calibrate --base h200`, and llama-1b's steps with
# LOOM_CUDA_GRAPH_TIMING=1 (device time per graph replay, GPU idle time between replays).
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; rm -rf $R; mkdir -p $R; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call1: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
pack() { tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee $R/gpu.txt
mkdir -p /tmp/s/llama-1b; (timeout 300 python3 bench/gpu/export_model.py llama-1b /tmp/s/llama-1b > $R/export-llama-1b.txt 2>&1) &
F='CudaBackend.*:Norm.*:CudaMixedDtype.*:CudnnAttention.*:SequenceSharding.Cuda*:CudaFp8.*:CudaFp8Amax.*:GemmTuning.*:GemmStaging.*:CudaStep*:GradientError*:CertifiedActivations.*'
timeout 150 $B/unittests/loom-unittests --gtest_filter="$F" > $R/unit.txt 2>&1
grep -hE "^\[  (PASSED|FAILED)|FAILED  \]" $R/unit.txt | head -20
stamp unit; pack
timeout 300 $LOOM calibrate --base h200 --backend cuda -o $R/h200.calibrated.json > $R/calibrate.txt 2>&1
echo "calibrate: exit $?"; tail -3 $R/calibrate.txt
stamp calibrate; pack
wait; stamp export
LOOM_CUDA_GRAPH_TIMING=1 LOOM_CUDA_PROFILE_FROM=2 timeout 120 $LOOM train /tmp/s/llama-1b/model.onnx --backend cuda \
  --data $FIX/corpus.u16.bin --batch 4 --seq 2048 --steps 12 --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 \
  > $R/timing-llama-1b.txt 2>&1
grep -E "^step (3|6|9|11) |graph timing" $R/timing-llama-1b.txt
stamp done; pack
