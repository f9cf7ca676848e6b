#!/usr/bin/python3
"""An agent watches a stream of frames through a sliding window, the way `kamera demo` does, on
the mini vision-language model in models/minivl (docs/MINIVL.md): each frame is encoded once and
cached; once the window is full each new frame evicts the oldest (the survivors keep their KV and
only move) and joins with a patch; every step asks a question about the window and prints
kamera's answer next to a re-prefill's. Every third question recalls an evicted frame instead.

    PYTHONPATH=build/python /usr/bin/python3 examples/agent.py [--frames 24] [--window 6]

With kamera installed (cmake --install, or pip install ./python), from anywhere:
    python3 agent.py --root KAMERA_CHECKOUT   (the folder that holds models/minivl)
"""
import argparse
import os
import time

import kamera

p = argparse.ArgumentParser()
p.add_argument("--frames", type=int, default=24)
p.add_argument("--window", type=int, default=6)
p.add_argument("--rank", type=int, default=4)
p.add_argument("--stream", type=int, default=0)
p.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
               help="the folder that holds models/minivl (default: this checkout)")
args = p.parse_args()
root = args.root
model = kamera.Model(os.path.join(root, kamera.minivl.decoder_file))
vision = kamera.Vision(os.path.join(root, kamera.minivl.vision_file))
ctx = kamera.Context(model)
window = kamera.Window(ctx, rank=args.rank)
words = kamera.minivl.words()
stream = kamera.minivl.stream(args.stream, args.frames)
chunks, first, agree, asked = [], 0, 0, 0


def ask(win, view, about):
    """The first single-hop question about frame `about` of the view; both arms' answers."""
    q = next(q for q in kamera.minivl.questions([stream[i] for i in view])
             if q.family == "single-hop" and q.frames == [about])
    t0 = time.perf_counter()
    mine = int(win.query(q.tokens).argmax())
    t1 = time.perf_counter()
    ref = int(ctx.assemble([chunks[i] for i in view], policy="reprefill").eval(q.tokens).argmax())
    t2 = time.perf_counter()
    return q, mine, ref, (t1 - t0) * 1e3, (t2 - t1) * 1e3


for t, frame in enumerate(stream):
    chunks.append(vision.encode(model, frame.rgb))  # the vision cache: each frame encoded once
    if len(window) == args.window:
        before = [s["position"] for s in window.slots[1:]]
        window.evict_front()
        first += 1
        assert [s["position"] for s in window.slots] == [x - 2 for x in before]  # moved only
    window.admit_back(chunks[-1])
    if len(window) < args.window:
        continue
    view, win, note = list(range(first, t + 1)), window, ""
    on_fork = {s["id"] for s in window.slots[1:]}  # a stream may show a picture twice
    evicted = [i for i in range(first) if chunks[i].id not in on_fork]
    if asked % 3 == 2 and evicted:  # recall: a fork drops its oldest frame, recalls an evicted one
        back = evicted[(t * 7) % len(evicted)]
        win = window.fork()
        win.evict_front()
        win.recall(chunks[back], at=0, mode="fresh")
        view, note = [back] + view[1:], f"  (recalled frame {back})"
    q, mine, ref, ms_mine, ms_ref = ask(win, view, about=asked % len(view) if not note else 0)
    asked, agree = asked + 1, agree + (mine == ref)
    span = f"{view[0]},{view[1]}..{view[-1]}" if note else f"{view[0]}..{view[-1]}"
    print(f"step {t:2d} frames {span:<9} {q.text:<44} kamera {words[mine]:<8}"
          f" re-prefill {words[ref]:<8} ({ms_mine:.2f} vs {ms_ref:.2f} ms){note}")
window.check()
print(f"{asked} questions: kamera agrees with re-prefill on {agree}; "
      f"store {ctx.store_stats()['canonical_entries']} frames cached")
