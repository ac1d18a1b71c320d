#!/usr/bin/env bash
# Issue 15, checks 4 and 5: measured pipeline bubble and activation memory
# against `loom plan`, on the CPU backend with one process per rank.
#
#   bench/pp/bubble.sh [BUILD] [MODEL] [OUT_DIR]
#
# For pp=2 and every schedule (GPipe, 1F1B, interleaved, ZB-H1, ZBV) with
# 4 and 8 microbatches:
#  1. `loom schedule --serial` writes the plan's unpipelined schedule (one
#     microbatch at a time through every stage, the same stage placement
#     and backward split) and `loom train --stage-costs-out` runs it with
#     one process per rank: the median time of each stage's F, B (or I and
#     W) and of a transfer over the socket communicator, on this machine;
#  2. `loom train --nproc 2 --trace` runs the plan itself: every rank's
#     actions with their start and end, and each rank's measured idle
#     fraction (steps after the first) and peak of saved activations;
#  3. `loom plan --stage-costs` times the same schedule object with the
#     costs of step 1: the predicted idle fraction per rank and the
#     activations per rank (--activation-bytes 4: the run is fp32).
# Two diagnostic columns: "replay" is the run's own schedule timed with its
# own mean action times (within a point or two of "measured": the schedule
# object times a run faithfully), "run/serial" each rank's compute time in
# the run over what the serial run's medians give for the same actions.
# Equal ratios: loom plan's input describes the run. Ratios more than 5%
# apart ("rank speeds drifted"): a rank computed faster or slower in one
# run than in the other (another core, clock or memory node, or other
# processes), and loom plan, given the serial run's speeds, predicts the
# wrong rank idle; rerun the row, pinned or on an idle host.
# A row PASSes when every rank's measured idle is within 5 points of
# loom plan's and, for GPipe and 1F1B, of (P - 1) / (M + P - 1), and the
# GPipe and 1F1B activation peaks are within 10% of loom plan's; the script
# exits 1 when a row FAILs. "cpu/wall" is the ranks' CPU time in compute
# actions over their wall time: well below 1, other processes took the
# cores and the timings describe the contention, not the schedule.
#
# Each rank runs one CPU thread (--threads 2 over 2 processes), so the
# machine wants 2 idle cores (the sender threads use a little more). Both
# runs of a row pin rank r to the same CPU (PIN=auto|on|off, loom train
# --pin-ranks, default auto: the launcher gives each rank a physical core
# of its own, on one memory node where it can), so the serial run measures
# the speed each rank has in the pipelined run; unpinned, a rank of one run
# may sit on another core, SMT sibling or memory node than in the other
# (the GPU host's 16 idle cores gave run/serial ratios up to ~40% apart).
# The header shows the CPU topology and the launcher's placement; a row
# whose two runs were placed differently is flagged. On a 2-core machine,
# `taskset -c 0,1 bash bench/pp/bubble.sh` gives the launcher those two. MODEL
# defaults to the zoo's llama-l4 (4 layers): from the build tree if it has
# one, else unpacked from test/fixtures/zoo.tar.xz into a temporary
# directory (a GPU bundle has no zoo). Sizes: batch 8 x seq 512, so a
# microbatch is 2 or 1 sequences and an action takes 15-90 ms on one core,
# next to transfers of a fraction of a millisecond; at 512 tokens the
# layers' attention outweighs the head and loss of the last stage, so the
# two stages differ by about 2% (at 256 tokens, 5%: rank 0 then idles 3-4
# points above (P - 1) / (M + P - 1) by the stage costs alone).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-build}
MODEL=${2:-}
OUT=${3:-pp-bubble}
LOOM=$BUILD/tools/loom/loom
# A GPU bundle (scripts/build-gpu-bundle.sh) carries the libraries loom needs.
[ -d "$BUILD/lib" ] && export LD_LIBRARY_PATH="$(cd "$BUILD/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ -z "$MODEL" ]; then
  MODEL=$BUILD/test/fixtures/zoo/llama-l4.dynamic.onnx
  if [ ! -f "$MODEL" ]; then
    ZOO=$(mktemp -d)
    trap 'rm -rf "$ZOO"' EXIT
    tar -xJf "$ROOT/test/fixtures/zoo.tar.xz" -C "$ZOO" zoo/llama-l4.dynamic.onnx
    MODEL=$ZOO/zoo/llama-l4.dynamic.onnx
  fi
fi
DATA=$ROOT/test/fixtures/corpus.u16.bin
BATCH=${BATCH:-8}
SEQ=${SEQ:-512}
STEPS=${STEPS:-6}
SERIAL_STEPS=${SERIAL_STEPS:-4}
SCHEDULES=${SCHEDULES:-gpipe:1 1f1b:1 interleaved:2 zb:1 zb:2} # kind:virtual stages
MICROBATCHES=${MICROBATCHES:-4 8}
PIN=${PIN:-auto}
# REPEAT=R launches each row's serial and pipelined runs R times, in turn,
# and compares per-rank medians: on a VM a rank process's speed can differ
# by tens of percent from one launch to the next (the run/serial column),
# noise that one pair of launches cannot tell from a planner error.
REPEAT=${REPEAT:-1}
mkdir -p "$OUT"
echo "# bench/pp/bubble.sh on $(hostname), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); model $(basename "$MODEL"), batch $BATCH x seq $SEQ, $STEPS steps (serial: $SERIAL_STEPS)"
# What the placement can go by: sockets, cores, SMT and memory nodes as
# the kernel reports them (a VM may hide its host's SMT), and this
# process's CPU mask.
echo "# CPUs: $(LC_ALL=C lscpu 2>/dev/null | awk -F: '/^(Socket\(s\)|Core\(s\) per socket|Thread\(s\) per core|NUMA node\(s\)|Model name)/ {gsub(/^ +/, "", $2); printf "%s%s %s", sep, $1, $2; sep="; "}'); allowed $(taskset -cp $$ 2>/dev/null | sed 's/.*: //'); --pin-ranks $PIN"
status=0
for sched in $SCHEDULES; do
  kind=${sched%:*}
  v=${sched#*:}
  for m in $MICROBATCHES; do
    bases=()
    for rep in $(seq 1 "$REPEAT"); do
    tag=$kind-v$v-m$m
    [ "$REPEAT" -gt 1 ] && tag=$tag-r$rep
    bases+=("$OUT/$tag")
    common=(--data "$DATA" --batch "$BATCH" --seq "$SEQ" --nproc 2 --threads 2 --pin-ranks "$PIN")
    "$LOOM" schedule --pp 2 --microbatches "$m" --schedule "$kind" --virtual "$v" --serial \
      --csv "$OUT/$tag.serial.csv" > "$OUT/$tag.serial.txt"
    "$LOOM" train "$MODEL" "${common[@]}" --steps "$SERIAL_STEPS" \
      --plan "pp=2,pp_schedule=$OUT/$tag.serial.csv,microbatches=$m" \
      --stage-costs-out "$OUT/$tag.costs.json" >> "$OUT/$tag.serial.txt"
    "$LOOM" train "$MODEL" "${common[@]}" --steps "$STEPS" \
      --plan "pp=2,pp_schedule=$kind,pp_virtual=$v,microbatches=$m" \
      --trace "$OUT/$tag.trace.json" > "$OUT/$tag.train.txt"
    if [ -z "${placed:-}" ]; then # the launcher's placement, then the table
      placed=1
      echo "# $(grep -m1 -E '^(pinned ranks|ranks not pinned)' "$OUT/$tag.train.txt")"
      printf '%-16s %2s | %-15s | %-15s | %-6s | %-8s | %-31s | %-15s | %-11s | %s\n' schedule M \
        "measured r0/r1" "loom plan r0/r1" theory cpu/wall "activations r0/r1 (MiB): run, plan" \
        "replay r0/r1" "run/serial" result
    fi
    "$LOOM" plan "$MODEL" --gpus 2 --gpu h100 --batch $((BATCH / m)) --seq "$SEQ" \
      --global-batch "$BATCH" --activation-bytes 4 --top 1000 --json \
      --stage-costs "$OUT/$tag.costs.json" > "$OUT/$tag.plan.json"
    done
    python3 - "$kind" "$v" "$m" "${bases[@]}" <<'EOF' || status=1
import json, re, statistics, sys
kind, v, m, bases = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
P = 2

def one(base):
    text = open(base + '.train.txt').read()
    # Where the launcher put the ranks, in the serial run and in this one.
    placement = lambda t: (re.findall(r'^(?:pinned ranks|ranks not pinned).*$', t, re.M) or ['?'])[0]
    same_place = placement(open(base + '.serial.txt').read()) == placement(text)
    idle = [float(x) for x in re.findall(r'^  rank \d+: ([0-9.]+)% \(', text, re.M)]
    # The run's own timeline: its schedule replayed with its own mean action
    # times (loom train prints it in parentheses).
    replay = [float(x) for x in re.findall(r'^  rank \d+: [0-9.]+% \(([0-9.]+)%\)', text, re.M)]
    held = [int(x) for x in re.findall(r'^  rank \d+: (\d+) B \(', text, re.M)]
    plans = [p for p in json.load(open(base + '.plan.json'))['plans']
             if p['pp'] == P and p['schedule'] == kind and p['virtual_stages'] == v
             and p['microbatches'] == m and p['checkpoint'] == 'none' and not p['fp8']]
    if not plans or plans[0]['time'].get('stage_costs', 'model') == 'model':
        sys.exit('%s: loom plan did not time the plan with the measured stage costs' % base)
    p = plans[0]
    pidle = [100 * f for f in p['time']['idle_fraction_per_pipeline_rank']]
    pact = p['activations_per_pipeline_rank']
    # CPU time over wall time of the compute actions (steps after the first).
    # Per rank, the run's compute time over what the serial run's medians
    # (the costs loom plan was given) say the same actions take: 1.00 when the
    # machine ran both runs at one speed. Unequal ratios mean a rank computed
    # at another speed in the run than in the serial run (another core, clock
    # or memory node): loom plan's input then does not describe the run.
    costs = json.load(open(base + '.costs.json'))['stage_costs']
    field = {'F': 'forward_s', 'B': 'backward_s', 'I': 'backward_input_s', 'W': 'backward_weight_s'}
    ran, serial = [0.0] * P, [0.0] * P
    cpu = wall = 0.0
    for e in json.load(open(base + '.trace.json'))['traceEvents']:
        if e.get('cat') == 'compute' and e['args']['step'] >= 1:
            cpu += e['args']['cpu_ms'] * 1e3
            wall += e['dur']
            ran[e['tid']] += e['dur'] / 1e6
            serial[e['tid']] += costs[e['args']['stage']][field[e['name'].split()[0]]]
    speed = [r / s if s else 0 for r, s in zip(ran, serial)]
    return idle, replay, held, pidle, pact, speed, cpu / wall if wall else 0, same_place

runs = [one(b) for b in bases]
med = lambda k: [statistics.median(r[k][i] for r in runs) for i in range(P)]
idle, replay, held, pidle, pact, speed = med(0), med(1), med(2), med(3), med(4), med(5)
cpuwall = statistics.median(r[6] for r in runs)
same_place = all(r[7] for r in runs)
ok = all(abs(a - b) <= 5 for a, b in zip(idle, pidle))
theory = None
if kind in ('gpipe', '1f1b'):
    theory = 100.0 * (P - 1) / (m + P - 1)
    ok = ok and all(abs(a - theory) <= 5 for a in idle)
    ok = ok and all(abs(a - b) <= 0.1 * b for a, b in zip(held, pact))
mib = lambda b: b / 2**20
print('%-16s %2d | %5.1f%% / %5.1f%% | %5.1f%% / %5.1f%% | %-6s | %8.2f | %6.2f / %6.2f, %6.2f / %6.2f | %5.1f%% / %5.1f%% | %4.2f / %4.2f | %s'
      % ('%s v=%d' % (kind, v), m, idle[0], idle[1], pidle[0], pidle[1],
         '-' if theory is None else '%.1f%%' % theory, cpuwall,
         mib(held[0]), mib(held[1]), mib(pact[0]), mib(pact[1]), replay[0], replay[1],
         speed[0], speed[1], ('PASS' if ok else 'FAIL') + (
             ' (rank speeds drifted)' if min(speed) > 0 and max(speed) / min(speed) > 1.05 else '') + (
             '' if same_place else ' (ranks placed differently in the two runs)')))
if len(runs) > 1:  # each launch pair's own figures, to show the spread
    for b, r in zip(bases, runs):
        print('  %-40s measured %5.1f%% / %5.1f%%, loom plan %5.1f%% / %5.1f%%, run/serial %4.2f / %4.2f'
              % (b.split('/')[-1], r[0][0], r[0][1], r[3][0], r[3][1], r[5][0], r[5][1]))
sys.exit(0 if ok else 1)
EOF
  done
done
exit $status
