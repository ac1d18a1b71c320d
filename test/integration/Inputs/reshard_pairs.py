"""For each model and (A, B) plan pair: 10 steps under A with a checkpoint,
then 10 more under B resumed from it, against 20 uninterrupted steps of B.
reshard_pairs.py WORKDIR MODEL... (run from lit: `loom` is on PATH, and the
fixtures folder is two levels up from this script's)."""
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
fix = os.path.join(here, "..", "..", "fixtures")
work, models = sys.argv[1], sys.argv[2:]
pairs = [("1", "dp_shard=4"), ("dp_shard=2,tp=2", "1"), ("tp=2", "dp_replicate=2"),
         ("dp_shard=4", "dp_shard=2,tp=2")]
status = 0
for m in models:
    common = ["loom", "train", os.path.join(fix, m + ".dynamic.onnx"), "--data", os.path.join(fix, "corpus.u16.bin"),
              "--batch", "4", "--seq", "64", "--batching", "fixture", "--warmup", "5",
              "--init-weights", os.path.join(fix, m + ".init.safetensors")]
    for a, b in pairs:
        tag = "%s-%s-%s" % (m, a.replace("=", "").replace(",", "_"), b.replace("=", "").replace(",", "_"))
        ck = os.path.join(work, tag)
        run = lambda args, out: subprocess.run(common + args, stdout=open(out, "w"), stderr=subprocess.STDOUT,
                                                check=True)
        run(["--steps", "10", "--plan", a, "--checkpoint-dir", ck, "--checkpoint-every", "10"], ck + ".a.txt")
        run(["--steps", "20", "--plan", b, "--resume", ck], ck + ".b.txt")
        run(["--steps", "20", "--plan", b], ck + ".ref.txt")
        r = subprocess.run([sys.executable, os.path.join(here, "compare_losses.py"), ck + ".b.txt", ck + ".ref.txt",
                            "1e-5", "10"], capture_output=True, text=True)
        print("%s %s -> %s: %s" % (m, a, b, r.stdout.strip()))
        status |= r.returncode
sys.exit(status)
