#!/usr/bin/env python3
"""loom plan's predicted time per opcode class beside LOOM_CUDA_PROFILE=1's
measured one, for one shape:

  plan_vs_profile.py PLAN.json PROFILE.txt [PLAN_ID_PART]

PLAN.json is `loom plan --gpus 1 ... --json` (the one-GPU plan's
time.compute_by_class, priced from the compiled program); PROFILE.txt a log
of `LOOM_CUDA_PROFILE=1 loom train ...` on the same model and shape (its
"loom cuda profile" table). PLAN_ID_PART picks the plan (default
"ac=none,fp8=off"). Prints, per class, instructions and milliseconds on
both sides, the ratio, the effective GB/s (or TFLOP/s) the profile implies
for the plan's bytes (FLOPs), and what the plan priced the class at; then
the totals. A class on one side only is listed with a dash on the other.
"""
import json
import re
import sys


def plan_classes(path, want):
    plans = json.load(open(path))["plans"]
    for p in plans:
        one = p["tp"] == 1 and p["cp"] == 1 and p["pp"] == 1 and p["dp_shard"] == 1 and p["dp_replicate"] == 1
        if one and want in p["id"] and p["time"].get("compute_source") == "program":
            return p["id"], p["time"]["compute_by_class"]
    sys.exit(f"{path}: no one-GPU plan priced from its program matches '{want}'")


def profile_classes(path):
    rows, runs = {}, None
    for line in open(path, errors="replace"):
        m = re.match(r"loom cuda profile: (\d+) runs", line)
        if m:
            rows, runs = {}, int(m.group(1))  # the last profile in the log wins
            continue
        m = re.match(r"\s+(\S+(?: (?:bf16|f32|f16|f64))?)\s+(\d+)\s+([0-9.]+)\s+[0-9.]+%$", line)
        if runs is not None and m:
            rows[m.group(1)] = (int(m.group(2)), float(m.group(3)))
    if not rows:
        sys.exit(f"{path}: no 'loom cuda profile' table (run loom train with LOOM_CUDA_PROFILE=1)")
    return rows


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    plan_id, plan = plan_classes(sys.argv[1], sys.argv[3] if len(sys.argv) > 3 else "ac=none,fp8=off")
    prof = profile_classes(sys.argv[2])
    names = sorted(set(plan) | set(prof), key=lambda c: -max(prof.get(c, (0, 0))[1], plan.get(c, {}).get("seconds", 0) * 1e3))
    print(f"plan {plan_id}")
    print(f"{'opcode class':22} {'instrs plan/meas':>17} {'ms plan':>9} {'ms meas':>9} {'plan/meas':>9} {'measured rate':>16}  priced at")
    tp = tm = 0.0
    for c in names:
        p, m = plan.get(c), prof.get(c)
        pms = p["seconds"] * 1e3 if p else None
        mms = m[1] if m else None
        tp += pms or 0
        tm += mms or 0
        rate = "-"
        if p and m and mms > 0:
            rate = (f"{p['flops'] / (mms * 1e-3) / 1e12:.0f} TFLOP/s" if p["flops"] > 0
                    else f"{p['bytes'] / (mms * 1e-3) / 1e9:.0f} GB/s")
        instrs = f"{p['instrs'] if p else '-'}/{m[0] if m else '-'}"
        ratio = f"{pms / mms:.3f}" if p and m and mms > 0 else "-"
        print(f"{c:22} {instrs:>17} {pms if pms is not None else float('nan'):9.3f} "
              f"{mms if mms is not None else float('nan'):9.3f} {ratio:>9} {rate:>16}  {p['rate'] if p else '-'}")
    print(f"{'total':22} {'':>17} {tp:9.3f} {tm:9.3f} {tp / tm if tm else float('nan'):9.3f}")


if __name__ == "__main__":
    main()
