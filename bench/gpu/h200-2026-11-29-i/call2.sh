#!/bin/bash
# call 2: norm_bench builds of the cp.async streaming norm-gradient kernel (stages, bounds)
set -u
R=$OUT/r; mkdir -p $R
tar xJf .carry/nb.tar.xz -C .carry
for b in .carry/nb/nb_*; do
  for d in 2048 1536 1280 4096; do
    case $b in *_256_*) [ $d = 4096 ] && continue;; esac
    echo "== $(basename $b) 8192 x $d" >> $R/nb.txt
    timeout 60 $b 8192 $d >> $R/nb.txt 2>&1
  done
done
grep -E '^==|stream .* two-pass|error|rror' $R/nb.txt
