"""Prints, for each `loom plan --json` file given, the predicted idle
fraction per pipeline rank of its pp=2 GPipe and 1F1B plans timed with
measured stage costs (no recompute, no fp8), next to (P - 1) / (M + P - 1).
Exits 1 when no such plan was timed with the stage costs."""
import json
import sys

found = 0
for path in sys.argv[1:]:
    for p in json.load(open(path))['plans']:
        if p['pp'] != 2 or p['schedule'] not in ('gpipe', '1f1b') or p['checkpoint'] != 'none' \
                or p['fp8'] or p['time'].get('stage_costs', 'model') == 'model':
            continue
        m, P = p['microbatches'], p['pp']
        theory = (P - 1) / (m + P - 1)
        idle = p['time']['idle_fraction_per_pipeline_rank']
        near = all(abs(f - theory) <= 0.01 for f in idle)
        print('%s M=%d: idle %s (theory %.4f) %s' % (
            p['schedule'], m, ' / '.join('%.4f' % f for f in idle), theory,
            'within a point' if near else 'off by more than a point'))
        found += 1
sys.exit(0 if found else 1)
