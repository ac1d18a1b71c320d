"""Exports one of suite_models.SHAPES to ONNX for loom: fp32 random weights as external data,
eager attention (the decomposed graph loom's importer fuses), dynamic batch and sequence.

    python3 export_model.py SHAPE OUT_DIR      writes OUT_DIR/model.onnx (+ model.onnx.data)

Runs on the CPU (no GPU memory, so exports can run side by side before anything is timed).
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from suite_models import SHAPES, logits_only, make  # noqa: E402

shape, out = sys.argv[1], sys.argv[2]
t0 = time.time()
torch.set_num_threads(max(1, (os.cpu_count() or 4) // 4))
model = make(shape, "eager", "cpu").eval()


os.makedirs(out, exist_ok=True)
path = os.path.join(out, "model.onnx")
# A batch of 2: torch.export specializes a dim whose example size is 1.
ids = torch.randint(0, 1000, (2, 128))
# The longest sequence the shape trains at bounds the dim (GPT-2 has 1024 positions).
seq = torch.export.Dim("seq", min=2, max=SHAPES[shape]["seq"])
torch.onnx.export(logits_only(model), (ids,), path, input_names=["input_ids"], output_names=["logits"],
                  dynamo=True, external_data=True,
                  dynamic_shapes=({0: torch.export.Dim("batch"), 1: seq},))
params = sum(p.numel() for p in model.parameters())
print(f"exported {shape} to {path}: {params} parameters in {time.time() - t0:.1f} s", flush=True)
