#!/bin/bash
# call 7 (twelfth session): a bias gradient's column sums in cuBLASLt's BGRADA epilogue against
# columnSumsBf16 after the product (its packed two-pass form, new here;
# LOOM_GEMM_BIAS_GRAD_EPILOGUE=0), on gpt2-large and qwen2.5-1.5b's per-opcode profiles; the CUDA
# kernel tests first.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; W=/tmp/loom-suite; rm -rf $R; mkdir -p $R $W; T0=$(date +%s); FIX=test/fixtures; LOOM=$B/tools/loom/loom
stamp() { echo "call7: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
pack() { tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz; }
for s in gpt2-large qwen2.5-1.5b; do
  mkdir -p $W/$s; (timeout 200 python3 bench/gpu/export_model.py $s $W/$s > $R/export-$s.txt 2>&1) &
done
F='CudaBackend.*:Norm.*:CudaMixedDtype.*:CudnnAttention.*:SequenceSharding.Cuda*:CudaFp8.*:CudaFp8Amax.*:GemmTuning.*:GemmStaging.*:CudaStep*:GradientError*:CertifiedActivations.*'
timeout 120 $B/unittests/loom-unittests --gtest_filter="$F" > $R/unit.txt 2>&1
grep -hE "^\[  (PASSED|FAILED)|FAILED  \]" $R/unit.txt | head -20
stamp unit; pack
wait; stamp exports
prof() { # model batch seq tag [env...]
  local m=$1 b=$2 t=$3 tag=$4; shift 4
  env "$@" LOOM_CUDA_PROFILE=1 LOOM_CUDA_PROFILE_FROM=2 timeout 60 $LOOM train $W/$m/model.onnx \
    --backend cuda --data $FIX/corpus.u16.bin --batch $b --seq $t --steps 5 --precision bf16 --lr 1e-4 --warmup 0 \
    --print-every 1 > $R/profile-$m-$tag.txt 2>&1
  echo "$m $tag: $(grep -E 'per run in kernels' $R/profile-$m-$tag.txt | cut -c1-90)"
  grep -E '^  (reduce|cast|matmul bf16) ' $R/profile-$m-$tag.txt | sed "s/^/    /"
}
prof gpt2-large 8 1024 kernel LOOM_GEMM_BIAS_GRAD_EPILOGUE=0
prof gpt2-large 8 1024 epilogue; pack
prof qwen2.5-1.5b 4 2048 kernel LOOM_GEMM_BIAS_GRAD_EPILOGUE=0
prof qwen2.5-1.5b 4 2048 epilogue
stamp done; pack
