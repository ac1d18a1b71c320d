#!/bin/bash
# call 5 (tenth session): the CUDA kernel tests on the final head's bundle (the test inputs shared
# by normGradCopyInputs; NormGradCopyIsTheCast also on rows of 40, the warp kernel with bf16 x and
# the copy's Cast) and the fixtures' step-0 gradients.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0
F='CudaBackend.*:Norm.*:CudaMixedDtype.*:CudaStep*:GradientError*:CudaFp8Amax.*'
timeout 90 $B/unittests/loom-unittests --gtest_filter="$F" 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED  \]" | head
for m in llama qwen2 gpt2; do
  $B/tools/loom/loom train test/fixtures/$m.dynamic.onnx --backend cuda --data test/fixtures/corpus.u16.bin --batch 4 --seq 64 --steps 1 \
    --batching fixture --init-weights test/fixtures/$m.init.safetensors --expect-grads test/fixtures/$m.grads0.npz 2>&1 | grep "step-0 gradients"
done
