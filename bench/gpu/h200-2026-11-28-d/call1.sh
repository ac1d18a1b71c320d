#!/bin/bash
# call 1 (2026-11-28, sixth session): the bundle at the gradient norm in one instruction
# (loom-fuse-global-sum-squares), the cross-entropy kernels' pack-wise sums and the certified
# roundings without int -> float conversions, none of them run on a GPU yet. In order: the CUDA
# kernel tests, the fixtures' step-0 gradients and fp32/bf16 curves, the zoo's curves; then
# llama-1b with the new pass off and on (same binary), the step profiled per opcode, and one
# swiglu_grad of the step under Nsight Compute if the machine has it.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=$OUT/r; mkdir -p $R; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call1: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
mkdir -p /tmp/s/llama-1b; timeout 300 python3 bench/gpu/export_model.py llama-1b /tmp/s/llama-1b > $R/export-llama-1b.txt 2>&1 &
F='CudaBackend.*:CudaMixedDtype.*:CudnnAttention.*:SequenceSharding.Cuda*:CudaFp8.*:CudaFp8Amax.*:GemmTuning.*:GemmStaging.*:CudaStep*:GradientError*'
timeout 150 $B/unittests/loom-unittests --gtest_filter="$F" > $R/unit.txt 2>&1
grep -hE "^\[  (PASSED|FAILED)|FAILED  \]" $R/unit.txt | head -20; stamp unit
for m in llama qwen2 gpt2; do
  $LOOM train $FIX/$m.dynamic.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 1 \
    --batching fixture --init-weights $FIX/$m.init.safetensors --expect-grads $FIX/$m.grads0.npz > $R/grads-$m.txt 2>&1
  echo "grads-$m: exit $? $(grep -E 'step-0 gradients' $R/grads-$m.txt)"
  for prec in fp32 bf16; do
    bound=2e-3 extra=(--grad-norm-rel 0.01); [ $prec = bf16 ] && bound=2e-2 extra=(--skip-unstable 2e-2)
    $LOOM train $FIX/$m.dynamic.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 64 --steps 50 \
      --batching fixture --warmup 5 --precision $prec --init-weights $FIX/$m.init.safetensors \
      --log $R/curve-$m-$prec.jsonl --print-program-stats > $R/curve-$m-$prec.txt 2>&1
    echo "curve-$m-$prec: $(python3 test/integration/Inputs/check_curve.py $R/curve-$m-$prec.jsonl $FIX/reference.json $m $prec --max-loss-diff $bound "${extra[@]}")"
  done
done
stamp parity
LOOM_GPU_TEST_OUT=$R/zoo LOOM_GPU_TEST_ZOO_ROWS="bf16 fp32" timeout 120 bash scripts/gpu-test-zoo.sh $B > $R/zoo.txt 2>&1
tail -2 $R/zoo.txt; stamp zoo
wait
for g in 0 1; do
  LOOM_FUSE_GLOBAL_SUM_SQUARES=$g timeout 90 $LOOM train /tmp/s/llama-1b/model.onnx \
    --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 2048 --steps 8 --precision bf16 --lr 1e-4 \
    --warmup 0 --print-every 1 > $R/llama-1b-global$g.txt 2>&1
  echo "llama-1b global_sum_squares=$g: $(grep -E '^step [2-7] ' $R/llama-1b-global$g.txt | awk '{print $NF}' | tr '\n' ' ')"
done
stamp ab
LOOM_CUDA_PROFILE=1 timeout 90 $LOOM train /tmp/s/llama-1b/model.onnx --backend cuda --data $FIX/corpus.u16.bin \
  --batch 4 --seq 2048 --steps 2 --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 > $R/profile-llama-1b.txt 2>&1
grep -A26 "opcode " $R/profile-llama-1b.txt | head -28; stamp profile
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none}"
if [ -n "$NCU" ]; then
  timeout 150 $NCU --kernel-name regex:'swiGluGrad|crossEntropy|groupSumSquares' --launch-count 4 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    $LOOM train /tmp/s/llama-1b/model.onnx --backend cuda --data $FIX/corpus.u16.bin --batch 4 --seq 2048 \
    --steps 1 --precision bf16 --lr 1e-4 --warmup 0 > $R/ncu.txt 2>&1
  echo "ncu exit $?"; grep -E "^  [a-zA-Z].*\(|Duration|Throughput|Achieved Occupancy|Registers Per|Theoretical Occ" $R/ncu.txt | head -40
fi
stamp done
