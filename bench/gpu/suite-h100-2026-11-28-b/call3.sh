#!/bin/bash
# call 3: the step time of this session's kernels against the previous head's (aa8d14e), in the
# same call on the same GPU (graph mode, as the suite runs loom), alternating old/new twice per
# shape, with the GPU's power draw and SM clock sampled throughout (nvidia-smi, 200 ms).
set -u
tar xJf .carry/gpu.tar.xz -C .carry; tar xJf .carry/gpu-old.tar.xz -C .carry
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
R=/tmp/r; W=/tmp/loom-suite; mkdir -p $R $W; T0=$(date +%s)
stamp() { echo "call3: $1 at $(( $(date +%s) - T0 )) s" | tee -a $R/stamps.txt; }
( while sleep 15; do tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz; done ) &
nvidia-smi --query-gpu=timestamp,power.draw,power.limit,clocks.sm,clocks.mem,temperature.gpu,clocks_event_reasons.sw_power_cap,clocks_event_reasons.hw_slowdown,utilization.gpu \
  --format=csv,noheader -lms 200 > $R/smi.csv 2>&1 &
for s in qwen3-1.7b gpt2-large; do python3 bench/gpu/export_model.py $s $W/$s > $R/export-$s.txt 2>&1 & done
wait_export() { while [ ! -f $W/$1/model.onnx ] && pgrep -f "export_model.py $1" > /dev/null; do sleep 2; done; sleep 3; }
run() { # VARIANT SHAPE B T N
  local D=.carry/gpu; [ $1 = old ] && D=.carry/gpu-old
  echo "$1 $2 run $5 start $(date +%s.%N)" >> $R/marks.txt
  LD_LIBRARY_PATH=$PWD/$D/lib timeout 150 $D/tools/loom/loom train $W/$2/model.onnx --backend cuda --data test/fixtures/corpus.u16.bin \
    --batch $3 --seq $4 --steps 10 --precision bf16 --lr 1e-4 --warmup 0 --print-every 1 > $R/$1-$2-$5.txt 2>&1
  echo "$1 $2 run $5 end $(date +%s.%N)" >> $R/marks.txt
  echo "$1 $2 #$5: $(grep -o 'tok/s [0-9]*' $R/$1-$2-$5.txt | tail -8 | awk '{print $2}' | sort -n | sed -n 4,5p | tr '\n' ' ')"
}
wait_export gpt2-large; stamp "gpt2 exported"
for n in 1 2; do run old gpt2-large 8 1024 $n; run new gpt2-large 8 1024 $n; done; stamp gpt2
wait_export qwen3-1.7b; stamp "qwen3 exported"
for n in 1 2; do run old qwen3-1.7b 4 2048 $n; run new qwen3-1.7b 4 2048 $n; done; stamp qwen3
kill %2 2>/dev/null; sleep 1
tar czf $OUT/r.tgz.tmp -C /tmp r && mv $OUT/r.tgz.tmp $OUT/r.tgz
