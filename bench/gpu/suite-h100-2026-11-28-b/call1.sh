#!/bin/bash
# call 1: CUDA kernel tests (the whole-tensor sums, vectorized rotary tables, packed LayerNorm),
# memory-bound calibration, PyTorch's compile caches for the four suite shapes (brought back so
# later calls compile from them), and loom's per-kernel profiles of the four shapes.
set -u
tar xJf .carry/gpu.tar.xz -C .carry; B=.carry/gpu
export LD_LIBRARY_PATH=$PWD/$B/lib NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache
R=/tmp/r; W=/tmp/loom-suite; mkdir -p $R $W; T0=$(date +%s)
stamp() { echo "call1: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
( while sleep 15; do cp $W/*.txt $R/ 2>/dev/null; tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz; done ) &
SHAPES="qwen3-1.7b gpt2-large llama-1b qwen2.5-1.5b"
( for s in qwen3-1.7b gpt2-large; do python3 bench/gpu/export_model.py $s $W/$s > $W/export-$s.txt 2>&1; done ) &
( for s in llama-1b qwen2.5-1.5b; do python3 bench/gpu/export_model.py $s $W/$s > $W/export-$s.txt 2>&1; done ) &
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > $R/gpu.txt
timeout 120 $B/unittests/loom-unittests --gtest_filter='CudaBackend.*:GemmStaging.*:CudaMixed*:CudaStep*:GradientError*:CudaFp8Amax.*' > $R/unittests.txt 2>&1
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/unittests.txt | head; stamp tests
timeout 90 $B/tools/loom/loom calibrate --memory-only --reps 5 > $R/calibrate-mem.txt 2>&1; stamp calibrate
for s in $SHAPES; do
  timeout 200 python3 bench/gpu/torch_suite.py $s compile 2 2 > $R/torch-warm-$s.txt 2>&1; stamp "torch $s"
  tail -1 $R/torch-warm-$s.txt
done
du -sh $TORCHINDUCTOR_CACHE_DIR
tar cf - -C /tmp inductor-cache | xz -T8 -6 > /tmp/ind.tar.xz; ls -la /tmp/ind.tar.xz
split -b 15M -d /tmp/ind.tar.xz $OUT/ind.tar.xz.; ls -la $OUT; stamp "cache packed"
for s in $SHAPES; do
  while [ ! -f $W/$s/model.onnx ] && pgrep -f "export_model.py $s" > /dev/null; do sleep 2; done
  read -r Bt Tt < <(python3 -c "import sys; sys.path.insert(0, 'bench/gpu'); from suite_models import SHAPES
s = SHAPES[sys.argv[1]]; print(s['batch'], s['seq'])" $s)
  LOOM_CUDA_PROFILE=1 timeout 120 $B/tools/loom/loom train $W/$s/model.onnx --backend cuda --data test/fixtures/corpus.u16.bin \
    --batch $Bt --seq $Tt --steps 2 --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 > $R/profile-$s.txt 2>&1
  stamp "profile $s"
done
tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz
