#!/usr/bin/env python3
"""Trace-driven simulation of the routing policies of issue 29 for 3 to 64 servers.

Input: a loopback run's requests (scripts/replay_fleet.mjs --out FILE, written under kamera route,
whose usage lists every request's segments: ids and tokens) and the cost model's constants
calibrated from the same run (scripts/fleet_bench.py writes both; --calibration FILE).

The trace is scaled to N servers by copying its agents (16 agents per 3 servers: a copy keeps the
shared system prompt's and documents' segment ids and renames its own observations'), and replayed
closed-loop: every agent sends its next request when the previous one ended.

Model of costs (all constants from the calibration, measured on loopback):
  a server runs one request at a time, first come first served;
  service = overhead_s + prefill_s_per_token * recomputed + fetch(rtt_s + bytes / fetch_bytes_per_s)
            + decode_s_per_token * completion_tokens;
  TTFT = queueing + service less the decode part;
  a segment is served from the server's memory when the server holds it (any context: the index's
  nearest match), else from the shared cluster when a server computed it behind the same
  antecedents (exact context: its canonical and patch are stored there; only segments of at least
  compact_tokens), else recomputed; memory is an LRU of memory_bytes of KV rows per server;
  bytes = tokens * row_bytes.
Policies: round robin; consistent hashing of the agent on a ring (100 virtual nodes per server);
the router's score (hot bytes - penalty * in-flight * work, work the moving average of the bytes
recent requests recomputed; ties to the least loaded), knowing exactly what each server holds
(its events).
Outputs per N and policy: hit rate (prompt tokens not recomputed), recomputed tokens, load
imbalance (max / mean requests per server), TTFT p50 / p99.

  python3 scripts/fleet_sim.py --trace FILE --calibration FILE [--servers 3,8,16,32,64] [--json OUT]
"""
import argparse
import bisect
import hashlib
import heapq
import json
from collections import OrderedDict


def ring_hash(s):
    return int(hashlib.md5(s.encode()).hexdigest()[:16], 16)


class Server:
    def __init__(self, memory_bytes):
        self.mem = OrderedDict()  # segment id -> bytes, LRU (last = most recent)
        self.cap = memory_bytes
        self.held = 0
        self.free_at = 0.0
        self.inflight = 0
        self.requests = 0

    def has(self, sid):
        return sid in self.mem

    def keep(self, sid, nbytes):
        if sid in self.mem:
            self.mem.move_to_end(sid)
            return
        self.mem[sid] = nbytes
        self.held += nbytes
        while self.held > self.cap and self.mem:
            _, b = self.mem.popitem(last=False)
            self.held -= b


def load_trace(path):
    """Agents -> their requests in order: (segments [(id, tokens, antecedents key)], completion
    tokens, prompt tokens). The segments are the router's cut of each body (replay_fleet.mjs
    --segments-url), the very ids the servers hold."""
    data = json.load(open(path))
    agents = {}
    for r in sorted(data['results'], key=lambda r: (r['agent'], r['turn'])):
        segs, ante = [], []
        for s in r['cut']:
            segs.append((s['id'], s['tokens'], '|'.join(ante)))
            ante.append(s['id'])
        agents.setdefault(r['agent'], []).append((segs, r['completion_tokens'], r['prompt_tokens']))
    return [agents[a] for a in sorted(agents)]


def scale(agents, copies):
    """The agents copied: a copy renames the segments seen in one agent only (its observations)."""
    owners = {}
    for a, reqs in enumerate(agents):
        for segs, _, _ in reqs:
            for sid, _, _ in segs:
                owners.setdefault(sid, set()).add(a)
    out = []
    for c in range(copies):
        for a, reqs in enumerate(agents):
            def rename(sid):
                return sid if c == 0 or len(owners[sid]) > 1 else '%s~%d' % (sid, c)
            out.append([([(rename(s), t, '|'.join(rename(x) for x in k.split('|') if x))
                          for s, t, k in segs], comp, prompt) for segs, comp, prompt in reqs])
    return out


def simulate(agents, n, policy, cal):
    servers = [Server(cal['memory_bytes']) for _ in range(n)]
    ring = sorted((ring_hash('s%d-%d' % (i, v)), i) for i in range(n) for v in range(100))
    keys = [h for h, _ in ring]
    shared = set()  # (segment, antecedents) stored in the cluster
    row = cal['row_bytes']
    rr = [0]
    work = [0.0]  # the router's moving average of a request's recomputed bytes
    ttfts, recomputed, prompt_total, fetched_bytes = [], 0, 0, 0
    events = [(0.0, a, 0) for a in range(len(agents))]  # (time, agent, turn)
    heapq.heapify(events)
    done = []  # (end time, server)

    def pick(a, segs):
        if policy == 'round-robin':
            rr[0] += 1
            return rr[0] % n
        if policy == 'hash':
            h = ring_hash('agent-%d' % a)
            return ring[bisect.bisect(keys, h) % len(ring)][1]
        prompt = sum(t for _, t, _ in segs) * row
        ahead = cal['load_penalty'] * max(work[0], 32 * row)
        best, best_key, best_hot = 0, None, 0
        for i, s in enumerate(servers):
            hot = sum(t * row for sid, t, _ in segs if s.has(sid))
            score = hot - ahead * s.inflight
            key = (score, -s.inflight, -((i - rr[0]) % n))
            if best_key is None or key > best_key:
                best, best_key, best_hot = i, key, hot
        rr[0] += 1
        work[0] = 0.9 * work[0] + 0.1 * (prompt - best_hot)
        return best

    while events:
        t, a, k = heapq.heappop(events)
        while done and done[0][0] <= t:
            servers[heapq.heappop(done)[1]].inflight -= 1
        segs, comp, prompt = agents[a][k]
        i = pick(a, segs)
        s = servers[i]
        s.requests += 1
        s.inflight += 1
        rec = max(0, prompt - sum(tk for _, tk, _ in segs))  # tokens outside any segment
        fetch_bytes = 0
        for sid, tk, ante in segs:
            if s.has(sid):
                pass
            elif (sid, ante) in shared:
                fetch_bytes += 2 * tk * row
            else:
                rec += tk
            s.keep(sid, tk * row)
            if tk >= cal['compact_tokens']:
                shared.add((sid, ante))
        fetch_s = (cal['fetch_rtt_s'] + fetch_bytes / cal['fetch_bytes_per_s']) if fetch_bytes else 0
        prefill = cal['overhead_s'] + cal['prefill_s_per_token'] * rec + fetch_s
        start = max(t, s.free_at)
        first = start + prefill
        end = first + cal['decode_s_per_token'] * comp
        s.free_at = end
        heapq.heappush(done, (end, i))
        ttfts.append(first - t)
        recomputed += rec
        prompt_total += prompt
        fetched_bytes += fetch_bytes
        if k + 1 < len(agents[a]):
            heapq.heappush(events, (end, a, k + 1))
    ttfts.sort()
    reqs = [s.requests for s in servers]
    mean = sum(reqs) / n
    return {'servers': n, 'policy': policy, 'agents': len(agents),
            'hit_rate': 1 - recomputed / max(1, prompt_total), 'recomputed_tokens': recomputed,
            'fetched_bytes': fetched_bytes, 'imbalance': max(reqs) / mean if mean else 0,
            'ttft_p50_ms': 1e3 * ttfts[len(ttfts) // 2],
            'ttft_p99_ms': 1e3 * ttfts[min(len(ttfts) - 1, int(0.99 * len(ttfts)))]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument('--trace', required=True)
    ap.add_argument('--calibration', required=True)
    ap.add_argument('--servers', default='3,8,16,32,64')
    ap.add_argument('--json')
    args = ap.parse_args()
    cal = json.load(open(args.calibration))
    base = load_trace(args.trace)
    rows = []
    for n in [int(x) for x in args.servers.split(',')]:
        agents = scale(base, max(1, round(n / 3)))
        for policy in ('round-robin', 'hash', 'router'):
            rows.append(simulate(agents, n, policy, cal))
    print('| servers | agents | policy | hit rate | recomputed tokens | imbalance (max/mean) | '
          'TTFT p50 ms | TTFT p99 ms |')
    print('|---|---|---|---|---|---|---|---|')
    for r in rows:
        print('| %d | %d | %s | %.3f | %d | %.2f | %.1f | %.1f |' % (
            r['servers'], r['agents'], r['policy'], r['hit_rate'], r['recomputed_tokens'],
            r['imbalance'], r['ttft_p50_ms'], r['ttft_p99_ms']))
    if args.json:
        json.dump({'calibration': cal, 'rows': rows}, open(args.json, 'w'), indent=1)


if __name__ == '__main__':
    main()
