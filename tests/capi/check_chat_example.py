#!/usr/bin/python3
"""Runs a 3-turn chat example (examples/chat_reuse.c, examples/chat_reuse.py) and checks, from what
it prints of each turn's report, that turn 2 reused turn 1's prompt as an exact prefix and that
turn 3, after the window slid past turn 1, served the survivors from the context they were
computed in (more than its exact prefix, from a context-* or patch-* source).

    check_chat_example.py --kamera build/bin/kamera --scratch DIR -- COMMAND [ARGS...]

The model is a seeded random-weight file made with `kamera make-model` (its path is appended to
COMMAND): the check is of reuse, never of the replies.
"""
import argparse
import os
import re
import subprocess
import sys

p = argparse.ArgumentParser()
p.add_argument("--kamera", required=True)
p.add_argument("--scratch", required=True)
p.add_argument("command", nargs="+")
a = p.parse_args()
os.makedirs(a.scratch, exist_ok=True)
model = os.path.join(a.scratch, "chat-tiny.gguf")
subprocess.run([a.kamera, "make-model", "--arch", "llama", "--preset", "tiny", "--seed", "3",
                "-o", model], check=True, capture_output=True)
run = subprocess.run(a.command + [model], capture_output=True, text=True, timeout=300)
print(run.stdout)
if run.returncode != 0:
    sys.exit(f"the example failed ({run.returncode}): {run.stderr[-2000:]}")

turns = {}
for line in run.stdout.splitlines():
    m = re.match(r"turn (\d+): prompt (\d+) tokens, (\d+) served without a forward", line)
    if m:
        cur = turns.setdefault(int(m.group(1)), {"prompt": int(m.group(2)),
                                                 "served": int(m.group(3)), "segments": []})
        continue
    m = re.match(r"\s+segment \d+: (\S+) (\d+) tokens", line)
    if m:
        cur["segments"].append((m.group(1), int(m.group(2))))

fails = []
if sorted(turns) != [1, 2, 3]:
    sys.exit(f"expected turns 1..3, got {sorted(turns)}")
for n, t in turns.items():
    if sum(k for _, k in t["segments"]) + 1 != t["prompt"]:  # the anchor is in no segment
        fails.append(f"turn {n}: the segments do not add up to the prompt: {t}")
t1, t2, t3 = turns[1], turns[2], turns[3]
if t1["served"] > 1:
    fails.append(f"turn 1 reused {t1['served']} tokens of a cold context")
first = t2["segments"][0] if t2["segments"] else ("none", 0)
if first[0] != "prefix" or first[1] < t1["prompt"] - 1:
    fails.append(f"turn 2 does not start with turn 1's prompt as a prefix: {first}, "
                 f"turn 1's prompt {t1['prompt']}")
prefix3 = sum(k for s, k in t3["segments"] if s == "prefix")
moved = sum(k for s, k in t3["segments"] if s.startswith(("context-", "patch-")))
if moved <= 0 or t3["served"] <= prefix3 + 1:
    fails.append(f"turn 3 served no survivor from its earlier context: {t3}")
if fails:
    sys.exit("\n".join(fails))
print(f"ok: turn 2 prefix {first[1]} of turn 1's {t1['prompt']}; turn 3 served {moved} tokens "
      f"of the survivors from their earlier context")
