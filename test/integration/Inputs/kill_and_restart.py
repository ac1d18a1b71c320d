"""Runs a command, SIGKILLs it at random moments and restarts the very same
command, until it has been killed KILLS times while running; then lets it
finish. What a preemptible cluster job's restarts look like.

    kill_and_restart.py --kills K --seed S --min 0.2 --max 1.2 -- CMD ARGS...

Prints one line per attempt and exits with the last run's status."""
import argparse
import random
import signal
import subprocess
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--kills", type=int, required=True)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--min", type=float, default=0.2)
ap.add_argument("--max", type=float, default=1.2)
ap.add_argument("cmd", nargs=argparse.REMAINDER)
a = ap.parse_args()
cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
rng = random.Random(a.seed)
kills = attempts = 0
while True:
    attempts += 1
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if kills < a.kills:
        wait = rng.uniform(a.min, a.max)
        try:
            p.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.wait()
            kills += 1
            print("attempt %d: killed after %.2f s" % (attempts, wait), flush=True)
            continue
        if p.returncode != 0:
            sys.stderr.write(p.stderr.read().decode())
            sys.exit(p.returncode)
        # It finished before the kill: the job is done (fewer kills than
        # asked, which the caller sees in the count).
        print("attempt %d: finished before its kill at %.2f s" % (attempts, wait), flush=True)
        break
    rc = p.wait()
    sys.stderr.write(p.stderr.read().decode())
    print("attempt %d: ran to the end (status %d)" % (attempts, rc), flush=True)
    if rc != 0:
        sys.exit(rc)
    break
print("%d kills, %d attempts" % (kills, attempts))
