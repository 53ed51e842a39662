"""Trains a tiny model under torch.profiler with a schedule and writes each
cycle's trace with export_chrome_trace, as a user would. Usage:
    profile_steps.py OUT_DIR
Writes OUT_DIR/cycle<k>.pt.trace.json and OUT_DIR/expected.json: for each
trace file the step labels torch itself recorded (its own ProfilerStep#N
events, read from the profiler, not from the file) and the wall-clock
times (µs) when the newest step ended (prof.step() was called) and just
before and after the export, so the test can check what trainwatch reads
from the files and when it places them."""
import json
import os
import sys
import time

import torch

out = sys.argv[1]
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                            torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.utils.data.TensorDataset(torch.randn(96, 8), torch.randn(96, 1))
loader = torch.utils.data.DataLoader(data, batch_size=8)

files = []
step_calls_us = []  # wall clock just before each prof.step()


def on_trace_ready(prof):
    enter_us = time.time_ns() // 1000
    # torch's in-memory names read "ProfilerStep*" (grouped for tables);
    # trace_name keeps the step number the export writes
    names = [getattr(e, "trace_name", None) or e.name for e in prof.events()]
    labels = sorted(int(n.split("#", 1)[1]) for n in names
                    if n.startswith("ProfilerStep#"))
    path = os.path.join(out, "cycle%d.pt.trace.json" % len(files))
    prof.export_chrome_trace(path)
    # called inside prof.step(), which first closed the newest step
    files.append({"file": os.path.basename(path), "steps": labels,
                  "last_step_end_us": step_calls_us[-1],
                  "export_enter_us": enter_us,
                  "export_exit_us": time.time_ns() // 1000})


schedule = torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=2)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                            schedule=schedule,
                            on_trace_ready=on_trace_ready) as prof:
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.03)
        step_calls_us.append(time.time_ns() // 1000)
        prof.step()

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump({"files": files, "torch": torch.__version__}, f)
