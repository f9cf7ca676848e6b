#!/usr/bin/env python3
"""On a reorder trace of the mini-VL, `keep` answers a question wrongly that the repair answers as re-prefill.

Issue 52's done-when, from plain chat requests (urllib, one user message per question: the frames as
PNG image_url parts, then the question as text, temperature 0) to `kamera serve` on the committed
mini-VL. The trace is scripts/minivl_frames.py --binding reorder (`kamera demo --binding reorder`):
the stream cut into sets of 6 consecutive frames, each set asked about in stream order, then twice
re-sorted, every question derived from the frames in the order sent, with its gold answer. Each
policy gets its own fresh server and the whole trace in order (what a policy serves depends on what
that server saw before):
  keep       "reuse": "keep": a frame seen before is served with the rows it had in its latest
             context, relocated (llama-server's --cache-reuse behaviour)
  reprefill  "reuse": "reprefill": no reuse at all (the reference)
  repair     "reuse": "patch" with "reuse_budget": B (--budget): the segments held from another
             context that the budget chooses are recomputed in context
Checked:
  - keep serves every re-sorted question's frames without a forward (no "recomputed" frame
    segment) and recomputes fewer prompt tokens than re-prefill over the trace;
  - at least one re-sorted question is answered wrongly by keep and rightly by re-prefill (a
    measured property of the committed model on this trace: the questions are printed);
  - on at least one such question the repair recomputes a frame in context (its usage's
    kamera.repair.recomputed_tokens) and answers as re-prefill (each one is printed), and
    over the trace the repair recomputes fewer prompt tokens than re-prefill (it still reuses).
Exit 0 when all hold, 1 otherwise (each failure printed), 77 without the committed weights.

  tests/serve/minivl_repair.py --kamera build/bin/kamera [--serve-kamera OTHER] [--budget B]
                               [--frames 48] [--clip 0] [--keep-only]
"""
import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import minivl_serve  # noqa: E402  (its Server, the mini-VL's paths; scripts/ on sys.path)
import minivl_frames  # noqa: E402

failures = []


def check(ok, what):
    print(('ok   ' if ok else 'FAIL ') + what)
    if not ok:
        failures.append(what)


def run_policy(kamera, tmp, name, bodies, fields):
    """The trace in order on a fresh server, `fields` added to every body: per question (answer,
    recomputed prompt tokens, segment sources, tokens the repair budget recomputed), or (None,
    error) where a request failed."""
    out = []
    with open(os.path.join(tmp, name + '.log'), 'w+b') as log:
        srv = minivl_serve.Server(kamera, log)
        try:
            for body in bodies:
                status, reply = srv.chat(dict(body, **fields))
                if status != 200:
                    out.append((None, '%d %s' % (status, reply.get('error', reply))))
                    continue
                u = reply['usage']
                recomputed = u['prompt_tokens'] - u['prompt_tokens_details']['cached_tokens']
                sources = [s['source'] for s in u['kamera']['segments']]
                repaired = u['kamera'].get('repair', {}).get('recomputed_tokens', 0)
                out.append((minivl_serve.answer(reply), recomputed, sources, repaired))
        finally:
            srv.stop()
    return out


def load_trace(folder):
    with open(os.path.join(folder, 'trace.json')) as f:
        trace = json.load(f)['questions']
    with open(os.path.join(folder, 'requests.jsonl')) as f:
        bodies = [json.loads(line) for line in f]
    return trace, bodies


def failed(name, results):
    errors = [r[1] for r in results if r[0] is None]
    check(not errors, '%s: every request answered (%d refused; first: %s)'
          % (name, len(errors), errors[0] if errors else '-'))
    return bool(errors)


def keep_wrong(trace, keep, ref):
    """Re-sorted questions keep answers wrongly and re-prefill rightly."""
    return [i for i, q in enumerate(trace)
            if q['type'] == 'reorder' and keep[i][0] != q['gold'] and ref[i][0] == q['gold']]


def check_keep(trace, keep, ref):
    frames_recomputed = [i for i, q in enumerate(trace) if q['type'] == 'reorder'
                         and keep[i][2][:-1].count('recomputed')]
    check(not frames_recomputed, 'keep serves every re-sorted question\'s frames from the cache '
          '(recomputed a frame at questions %s)' % frames_recomputed)
    k_tok, r_tok = sum(r[1] for r in keep), sum(r[1] for r in ref)
    check(k_tok < r_tok, 'keep recomputes fewer prompt tokens than re-prefill (%d vs %d)'
          % (k_tok, r_tok))
    found = keep_wrong(trace, keep, ref)
    for i in found:
        q = trace[i]
        print('     question %d (%s, frames %s): %s  gold %s  keep %s  reprefill %s'
              % (i, q['type'], q['stream_frames'], q['question'], q['gold'], keep[i][0], ref[i][0]))
    check(len(found) >= 1, 'keep answers at least one re-sorted question wrongly that re-prefill '
          'answers rightly (%d of %d re-sorted questions)'
          % (len(found), sum(q['type'] == 'reorder' for q in trace)))
    return found


def check_repair(trace, found, repair, ref, budget):
    same = [i for i in found if repair[i][0] == ref[i][0] and repair[i][3] > 0]
    for i in found:
        print('     question %d: repair (budget %g, %d tokens repaired) %s, re-prefill %s, keep '
              'wrong, gold %s' % (i, budget, repair[i][3], repair[i][0], ref[i][0],
                                  trace[i]['gold']))
    check(len(same) >= 1, 'repair (budget %g) answers as re-prefill at least one question keep '
          'answers wrongly (%d of %d: questions %s)' % (budget, len(same), len(found), same))
    p_tok, r_tok = sum(r[1] for r in repair), sum(r[1] for r in ref)
    check(p_tok < r_tok, 'repair recomputes fewer prompt tokens than re-prefill (%d vs %d)'
          % (p_tok, r_tok))


def main():
    for f in (minivl_serve.DECODER, minivl_serve.VISION):
        if not os.path.exists(f):
            print('SKIP: %s is missing (the committed mini-VL weights)' % f)
            return 77
    with tempfile.TemporaryDirectory(prefix='kamera-minivl-repair-') as tmp:
        folder = os.path.join(tmp, 'frames')
        if minivl_frames.main(['--kamera', ARGS.kamera, '--out', folder, '--bodies', '--binding',
                               'reorder', '--frames', str(ARGS.frames),
                               '--clip', str(ARGS.clip)]) != 0:
            print('FAIL scripts/minivl_frames.py --binding reorder')
            return 1
        trace, bodies = load_trace(folder)
        serve = ARGS.serve_kamera or ARGS.kamera
        ref = run_policy(serve, tmp, 'reprefill', bodies, {'reuse': 'reprefill'})
        keep = run_policy(serve, tmp, 'keep', bodies, {'reuse': 'keep'})
        if failed('reprefill', ref) or failed('keep', keep):
            return 1
        found = check_keep(trace, keep, ref)
        if ARGS.keep_only:
            print('(--keep-only: the repair half was not run)')
        else:
            repair = run_policy(serve, tmp, 'repair', bodies,
                                {'reuse': 'patch', 'reuse_budget': ARGS.budget})
            if not failed('repair', repair):
                check_repair(trace, found, repair, ref, ARGS.budget)
    print('%d failure(s)' % len(failures))
    return 1 if failures else 0


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--kamera', required=True, help='the kamera binary (demo and serve)')
    ap.add_argument('--serve-kamera', help='another binary to serve with (the trace is --kamera\'s)')
    ap.add_argument('--budget', type=float, default=0.3,
                    help='the repair\'s "reuse_budget" (share of the reused tokens recomputed)')
    ap.add_argument('--frames', type=int, default=48, help='stream length of the trace')
    ap.add_argument('--clip', type=int, default=0, help='Test-split stream of the trace')
    ap.add_argument('--keep-only', action='store_true', help='only the keep / re-prefill half')
    ARGS = ap.parse_args()
    sys.exit(main())
