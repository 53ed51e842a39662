#!/usr/bin/env bash
# The main job on the embedded default, from nothing: install dependencies,
# build, generate the bundled sample training job (2 nodes, 20 minutes, a
# planted CPU bottleneck; deterministic) and evaluate it with the default
# rule set, printing each rule's status and findings.
# Extra arguments go to `trainwatch eval` (e.g. --json, --semantics reference).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
SAMPLE=build/sample-job
if [ ! -f "$SAMPLE/.complete" ]; then
  rm -rf "$SAMPLE"
  build/trainwatch synth "$SAMPLE" --preset cpu_bottleneck --nodes 2 \
    --gpus 4 --cores 8 --duration 20m --seed 42
  touch "$SAMPLE/.complete"
fi
exec build/trainwatch eval "$SAMPLE" "$@"
