#!/bin/bash
# call 1 (thirteenth session): the previous head (f472ccf, CPU-tested only) on the GPU: CUDA
# kernel tests, the fixtures' gradients and 50-step curves; then sibling_gemm_bench (q/k/v and
# gate/up apart and as one GEMM each).
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; rm -rf $R; mkdir -p $R; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call1: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
pack() { tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv,noheader | tee $R/gpu.txt
nvcc -O3 -arch=sm_90 -std=c++17 bench/gpu/sibling_gemm_bench.cu -lcublasLt -o /tmp/sgb && /tmp/sgb > $R/sgb.txt 2>&1
cat $R/sgb.txt | tail -9; stamp sgb; pack
F='CudaBackend.*:Norm.*:CudaMixedDtype.*:CudnnAttention.*:SequenceSharding.Cuda*:CudaFp8.*:CudaFp8Amax.*:GemmTuning.*:GemmStaging.*:CudaStep*:GradientError*:CertifiedActivations.*'
timeout 150 $B/unittests/loom-unittests --gtest_filter="$F" > $R/unit.txt 2>&1
grep -hE "^\[  (PASSED|FAILED)|FAILED  \]" $R/unit.txt | head -20
stamp unit; pack
for m in llama qwen2 gpt2; do
  $LOOM train $FIX/$m.dynamic.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 1 \
    --batching fixture --init-weights $FIX/$m.init.safetensors --expect-grads $FIX/$m.grads0.npz > $R/grads-$m.txt 2>&1
  echo "grads-$m: exit $? $(grep -E 'step-0 gradients' $R/grads-$m.txt)"
  for prec in fp32 bf16; do
    bound=2e-3 extra=(--grad-norm-rel 0.01); [ $prec = bf16 ] && bound=2e-2 extra=(--skip-unstable 2e-2)
    $LOOM train $FIX/$m.dynamic.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 50 \
      --batching fixture --warmup 5 --precision $prec --init-weights $FIX/$m.init.safetensors \
      --log $R/curve-$m-$prec.jsonl > $R/curve-$m-$prec.txt 2>&1
    echo "curve-$m-$prec: $(python3 test/integration/Inputs/check_curve.py $R/curve-$m-$prec.jsonl $FIX/reference.json $m $prec --max-loss-diff $bound "${extra[@]}")"
  done
done
stamp parity; pack
