#!/usr/bin/env python3
"""`kamera make-model --arch gpt-oss` through the binary (docs/MODELS.md, "gpt-oss"): the tiny
preset's file, as `kamera info -m FILE --json` reads it, is gpt-oss with attention sinks and its
experts in mxfp4 (the other matrices in the --type asked for); `make-model --help` names the
gpt-oss-20b preset (not written here: its file is many GB).

    tests/cli/make_model_gpt_oss.py --kamera build/bin/kamera
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

p = argparse.ArgumentParser()
p.add_argument("--kamera", required=True)
args = p.parse_args()

tmp = tempfile.mkdtemp(prefix="kamera-gpt-oss-make-")
failures = []
try:
    model = os.path.join(tmp, "gpt-oss-tiny.gguf")
    subprocess.run([args.kamera, "make-model", "--arch", "gpt-oss", "--type", "q8_0", "-o", model],
                   check=True, stdout=subprocess.DEVNULL)
    info = json.loads(subprocess.run([args.kamera, "info", "-m", model, "--json"], check=True,
                                     capture_output=True, text=True).stdout)
    m = info["model"]
    if m.get("arch") != "gpt-oss":
        failures.append(f"arch {m.get('arch')!r}, want 'gpt-oss'")
    if not any(f.startswith("attention_sinks") for f in m.get("features", [])):
        failures.append(f"no attention_sinks among the features {m.get('features')}")
    types = m.get("weight_types", {})
    for t in ("mxfp4", "q8_0", "f32"):
        if t not in types:
            failures.append(f"no {t} tensors among the weight types {sorted(types)}")
    helptext = subprocess.run([args.kamera, "make-model", "--help"], check=True,
                              capture_output=True, text=True).stdout
    if "gpt-oss-20b" not in helptext:
        failures.append("make-model --help does not name the gpt-oss-20b preset")
finally:
    shutil.rmtree(tmp, ignore_errors=True)

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
