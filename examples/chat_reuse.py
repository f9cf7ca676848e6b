#!/usr/bin/python3
"""A 3-turn chat through the kamera Python package with automatic reuse, as examples/chat_reuse.c:
each turn's whole conversation is rendered with the chat template and evaluated with
Context.prompt_eval, which serves what the context has seen (as `kamera serve` serves a request).
Turn 2 finds turn 1's prompt and reply as an exact prefix; turn 3 slides the window (drops turn 1)
and finds the survivors' KV from the context they were computed in. Each turn prints where every
run of its prompt came from.

    build/bin/kamera make-model --arch llama --preset tiny -o /tmp/tiny.gguf
    PYTHONPATH=build/python /usr/bin/python3 examples/chat_reuse.py /tmp/tiny.gguf
"""
import sys

import numpy as np

import kamera

REPLY_TOKENS = 12

model = kamera.Model(sys.argv[1])
ctx = kamera.Context(model, kv_tokens=8192)


def turn(number, messages):
    ids = model.chat_tokenize(messages, chat_template="chatml")
    seq, logits = ctx.prompt_eval(ids, reuse="patch")
    report = seq.report
    computed = report["tokens_computed"]
    print(f"turn {number}: prompt {len(ids)} tokens, {len(ids) - computed} served without a "
          f"forward, {computed} prefilled")
    for i, s in enumerate(report["segments"]):
        print(f"  segment {i}: {s['source'].replace('_', '-')} {s['n_tokens']} tokens at "
              f"{s['position']}")
    reply = []
    for _ in range(REPLY_TOKENS):  # greedy
        reply.append(int(np.argmax(logits)))
        logits = seq.eval([reply[-1]], logits="last")
    seq.remember()  # the reply too, for the next turn
    return model.detokenize(reply)


system = {"role": "system",
          "content": "You are a careful assistant who answers in one short sentence."}
u1 = {"role": "user",
      "content": "Here is a long note about the harbour: the boats leave at dawn and return at dusk."}
u2 = {"role": "user",
      "content": "Now a second note about the market: it opens at nine and closes early on Sundays."}
u3 = {"role": "user", "content": "Which of the two notes mentions Sundays?"}
r1 = turn(1, [system, u1])
r2 = turn(2, [system, u1, {"role": "assistant", "content": r1}, u2])
# the window slides: turn 1's exchange is dropped, the rest is kept
turn(3, [system, u2, {"role": "assistant", "content": r2}, u3])
