#!/bin/bash
# call 5 (ninth session): after the review commit 0208af1 (rotated() shared by both rotary kernels,
# rowLossTerm shared by the loss kernels), the CUDA kernel tests and two fixtures' step-0 gradients.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0
F='CudaBackend.*:Norm.*:CudaMixedDtype.*:CudaStep*:GradientError*'
timeout 120 $B/unittests/loom-unittests --gtest_filter="$F" 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED  \]" | head
for m in llama qwen2; do
  $B/tools/loom/loom train test/fixtures/$m.dynamic.onnx --backend cuda --data test/fixtures/corpus.u16.bin --batch 4 --seq 64 --steps 1 \
    --batching fixture --init-weights test/fixtures/$m.init.safetensors --expect-grads test/fixtures/$m.grads0.npz 2>&1 | grep "step-0 gradients"
done
