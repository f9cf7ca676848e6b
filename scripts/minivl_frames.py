#!/usr/bin/env python3
"""The agent demo's frames and questions as files, for any client of `kamera serve`.

`kamera demo` synthesizes its stream in code (minivl::make_stream, the Test split): 32 x 32 RGB
frames of coloured shapes, watched through a sliding window. This script runs the demo once
(`kamera demo --json --save-frames DIR`) and writes, in DIR:

  frame-NNNN.png   each stream frame (32 x 32 RGB PNG, NNNN = its index in the stream)
  demo.json        the demo's own JSON (every step, both of its arms' answers)
  trace.json       one entry per question: the frames the model sees, in order (the window, or
                   the recall fork: an evicted frame back at the front), the question's words,
                   the gold answer and the demo's answers (re-prefill: the reference; kamera: its
                   cached window)
  requests.jsonl   with --bodies: one /v1/chat/completions body per question, the frames as
                   image_url parts (PNG data: URLs) and the question as text, temperature 0

With --binding reorder|recall the trace is `kamera demo --binding MODE` instead (no model runs,
demo/binding_trace.h): views the sliding window never produces, each with a question the generator
derives from the frames in that order (cross-frame where it can) and its gold answer, no demo
answers: `reorder` asks each set of W consecutive frames in stream order, then re-sorted
(--reorders times); `recall` slides the window and every --recall-every-th question (default 2)
puts an evicted frame back at a drawn place. Each entry also says `binds`: a frame the answer
depends on follows another frame than in the latest earlier view that held it.

A replay client sends requests.jsonl in order: a sliding window of frames, one question per step,
which `kamera serve -m models/minivl/minivl.gguf --mmproj models/minivl/minivl-mmproj.gguf`
answers as the demo does (tests/serve/minivl_serve.py checks it).

  scripts/minivl_frames.py --out DIR [--bodies] [--kamera build/bin/kamera] [--frames 24]
                           [--window 6] [--clip 0] [--recall-every 4]
                           [--binding reorder|recall] [--reorders 2]
"""
import argparse
import base64
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def data_url(path):
    with open(path, 'rb') as f:
        return 'data:image/png;base64,' + base64.b64encode(f.read()).decode()


def chat_body(entry, folder):
    """The chat request of one trace entry: its frames as image_url parts, then its question."""
    content = [{'type': 'image_url', 'image_url': {'url': data_url(os.path.join(folder, f))}}
               for f in entry['frames']]
    content.append({'type': 'text', 'text': entry['question']})
    return {'messages': [{'role': 'user', 'content': content}], 'temperature': 0}


def trace_of(demo):
    out = []
    for step in demo['steps']:
        q = step.get('question')
        if not q:
            continue
        out.append({'step': step['step'], 'type': q['type'], 'kind': q['kind'],
                    'stream_frames': q['frames'],
                    'frames': ['frame-%04d.png' % i for i in q['frames']],
                    'question': q['text'], 'gold': q['gold']})
        if 'reprefill' in q:  # the demo's own arms (a --binding trace has none)
            out[-1]['demo'] = {'reprefill': q['reprefill'], 'kamera': q['kamera']}
        if 'binds' in q:  # a --binding trace: the stream frames the answer depends on
            out[-1]['answer_frames'] = q['stream_frames']
        for k in ('binds', 'recalled', 'fallback'):
            if k in q:
                out[-1][k] = q[k]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0],
                                 epilog=__doc__.split('\n', 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--out', required=True, help='folder for the frames and the trace (created)')
    ap.add_argument('--kamera', default=os.path.join(ROOT, 'build', 'bin', 'kamera'))
    ap.add_argument('--decoder', default=os.path.join(ROOT, 'models', 'minivl', 'minivl.gguf'))
    ap.add_argument('--vision',
                    default=os.path.join(ROOT, 'models', 'minivl', 'minivl-mmproj.gguf'))
    ap.add_argument('--frames', type=int, default=24, help='stream length (the demo: 24)')
    ap.add_argument('--window', type=int, default=6, help='frames in the window (the demo: 6)')
    ap.add_argument('--clip', type=int, default=0, help='Test-split stream (the demo: 0)')
    ap.add_argument('--recall-every', type=int, default=None,
                    help='every k-th question is a recall question (the demo: 4, 0: none; '
                    '--binding recall: 2)')
    ap.add_argument('--binding', choices=['reorder', 'recall'],
                    help='a trace that binds across frames (kamera demo --binding) instead')
    ap.add_argument('--reorders', type=int, default=2,
                    help='--binding reorder: re-sorted views per set of frames')
    ap.add_argument('--bodies', action='store_true', help='also write requests.jsonl')
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    cmd = [a.kamera, 'demo', '--json', '--frames', str(a.frames), '--window', str(a.window),
           '--clip', str(a.clip), '--save-frames', a.out]
    if a.recall_every is not None or not a.binding:
        cmd += ['--recall-every', str(4 if a.recall_every is None else a.recall_every)]
    if a.binding:
        cmd += ['--binding', a.binding, '--reorders', str(a.reorders)]
    else:
        cmd += ['--png', 'none', '--reps', '1', '--decoder', a.decoder, '--vision', a.vision]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.stderr.write(run.stderr + run.stdout)
        print('minivl_frames: `%s` failed (exit %d)' % (' '.join(cmd), run.returncode),
              file=sys.stderr)
        return 1
    demo = json.loads(run.stdout)
    trace = trace_of(demo)
    with open(os.path.join(a.out, 'demo.json'), 'w') as f:
        json.dump(demo, f, indent=1)
    with open(os.path.join(a.out, 'trace.json'), 'w') as f:
        json.dump({'config': demo['config'], 'questions': trace}, f, indent=1)
    if a.bodies:
        with open(os.path.join(a.out, 'requests.jsonl'), 'w') as f:
            for e in trace:
                f.write(json.dumps(chat_body(e, a.out)) + '\n')
    print('%d frames and %d questions in %s' % (a.frames, len(trace), a.out))
    return 0


if __name__ == '__main__':
    sys.exit(main())
