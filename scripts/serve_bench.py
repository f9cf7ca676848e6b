#!/usr/bin/env python3
"""Loopback measurements of an HTTP server (kamera serve, or a peer with the same OpenAI routes).

Starts the server itself (--server-cmd, with {port} in it), so that any build can be measured by
the same command, and reads the server's memory from /proc/PID/status. Python standard library
only. Subcommands:

  load       C concurrent streaming clients, R requests each: throughput (completion tokens/s)
             and TTFT p50/p99; --reuse: prompts that reference two uploaded chunks (kamera only),
             --slow N: N slowloris connections held open meanwhile
  slowloris  N connections each sending one byte every --interval s; /health latency meanwhile
  chunked    a chunked body of --mb MiB without the API key: status, bytes the server took before
             it closed, and the server's peak RSS growth
  rss        one completion with a prompt of each --sizes MiB: the server's peak RSS growth
  sampling   --clients C concurrent completions at temperature 0 and at --temperature/--top-p,
             alternated --reps times: completion tokens per second of each and their ratio
  choices    one prompt of --prompt-tokens tokens with n = 1, with n = --n, and as --n separate
             requests, each on a fresh server: seconds, completion tokens and the most KV pool
             pages held (kamera's /metrics)
  spec       speculative decoding: the same requests on one server per --arms (default: none
             ngram; draft: "--spec draft -md" --draft plus --draft-args; forced / forced-text:
             --spec none with --spec-forced on / text; ngram+forced, draft+forced; the others
             --spec-forced off), each --server-cmd plus "--spec ARM", interleaved --reps times
             (the arms' order rotates every round),
             --clients requests at once (different seeds): a copying workload (temperature 0, a
             prompt quoting a tool result) and a sampled one (--temperature, --top-p): decode
             tokens/s of each arm (completion tokens after the first over the seconds after the
             first token, median over requests), all the round's completion tokens over its wall
             seconds, completion tokens per CPU second of the server (its user + system time
             over the round: less sensitive to a loaded host), each arm's ratios to the first,
             the tokens drafted and accepted (usage.kamera.speculative), the load average before
             each round, and whether the greedy (copying) answers of all arms are the same tokens;
             --trace FILE (a JSON list of conversations, each a list of {role, content} messages
             ending with the assistant's, e.g. `kamera-train loop-trace`): instead, every
             assistant turn of conversation (round mod count) as a chat completion of the
             messages before it, one turn after another as an agent sends them, at temperature 0
             ("greedy") and at --temperature ("sampled"): besides the above, each arm's seconds
             per turn (median) and its whole conversation's seconds, and the speedups;
             --workload tools: instead, --clients chat turns at once that must call one of two
             tools (tool_choice "required") or answer a JSON schema, every argument an enum, a
             bounded integer or a boolean, greedy and sampled, timed as the trace's turns; the
             share of completion tokens the grammar forced (usage.kamera.speculative.forced) and
             whether each arm's seeded sampled answers are the first arm's tokens
  agents     --agents concurrent agents, --turns turns each (chat completions, streamed, each
             turn resending the conversation: a system prompt, a --words word task, then per
             turn the reply and a --obs-words word observation, as a tool loop does): all the
             completion tokens over the wall seconds, TTFT p50/p99/max (and of the first turns,
             which arrive together, apart from the later ones), the gaps between streamed
             chunks p50/p99; works against llama-server too

Examples (stories260K; sampling and choices: the 0.5b shape with a real vocabulary,
docs/BENCHMARKS.md):
  S="build/bin/kamera serve -m ../shared/models/stories260K/stories260K.gguf -t 2 --port {port}"
  python3 scripts/serve_bench.py --server-cmd "$S" load --clients 32 --requests 4
  python3 scripts/serve_bench.py --server-cmd "$S --api-key-file k" chunked --mb 1024
"""
import argparse
import http.client
import json
import os
import shlex
import socket
import statistics
import subprocess
import threading
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class ServerProc:
    def __init__(self, cmd):
        self.port = free_port()
        argv = shlex.split(cmd.replace("{port}", str(self.port)))
        log = open(os.environ["SERVE_BENCH_LOG"], "w") if os.environ.get("SERVE_BENCH_LOG") else None
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                     stderr=log or subprocess.DEVNULL)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("server did not start: " + cmd)

    def kb(self, field):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return -1

    def cpu_s(self):
        """CPU seconds (user + system) the server has used so far."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def reset_peak(self):
        with open(f"/proc/{self.proc.pid}/clear_refs", "w") as f:
            f.write("5")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def post(port, path, body, headers=None, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    c.request("POST", path, json.dumps(body), h)
    r = c.getresponse()
    return r.status, r.read()


def health_ms(port, timeout=10):
    t0 = time.perf_counter()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("GET", "/health")
        ok = c.getresponse().status == 200
    except OSError:
        ok = False
    return (time.perf_counter() - t0) * 1e3 if ok else float("inf")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")


def stream_one(port, body, out):
    """One streaming completion: (ttft s, tokens, total s) appended to out; errors counted.
    Raw socket reads and no per-token JSON parsing, so that 128 client threads on the same cores
    as the server cost little: the first non-empty "text" marks the first token, and the count
    of "text" pieces is the number of tokens."""
    payload = json.dumps(dict(body, stream=True)).encode()
    t0 = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload)
    data, ttft = b"", None
    while True:
        try:
            buf = s.recv(1 << 16)
        except OSError:  # no answer within the timeout
            out.append(("error", "timeout"))
            return
        if not buf:
            break
        data += buf
        if ttft is None and (b'"text":"' in buf.replace(b'"text":""', b"")):
            ttft = time.perf_counter() - t0
    s.close()
    if not data.startswith(b"HTTP/1.1 200"):
        out.append(("error", data[9:12]))
        return
    pieces = data.count(b'"text":"') - data.count(b'"text":""')
    out.append((ttft or 0.0, pieces, time.perf_counter() - t0))


class Slowloris:
    """n connections, each sending one byte of a never-ending head every `interval` seconds."""

    def __init__(self, port, n, interval):
        self.socks, self.stop_flag = [], threading.Event()
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            self.socks.append(s)
        self.head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100000
        self.thread = threading.Thread(target=self.run, args=(interval,), daemon=True)
        self.thread.start()

    def run(self, interval):
        i = 0
        while not self.stop_flag.wait(interval):
            for s in self.socks:
                try:
                    s.send(self.head[i:i + 1])
                except OSError:
                    pass
            i += 1

    def close(self):
        self.stop_flag.set()
        self.closed_by_server = 0
        for s in self.socks:
            s.settimeout(0.01)
            try:
                self.closed_by_server += s.recv(1) == b""
            except OSError:
                pass
            s.close()


def cmd_load(a, srv):
    base = {"max_tokens": a.max_tokens, "temperature": 0.8, "top_k": 40}
    text = "Once upon a time there was a little girl named Lily. She loved to play outside. "
    if a.reuse:
        ids = []
        for t in (text * 2, " One day she found a big red ball in the park and ran home. " * 2):
            st, b = post(srv.port, "/v1/chunks", {"text": t})
            ids.append(json.loads(b)["id"])
        prompt = [{"type": "chunk", "id": ids[0]}, {"type": "chunk", "id": ids[1]}, " Then"]
    else:
        prompt = text * 2 + " One day she found a big red ball in the park and ran home. " * 2 + " Then"
    body = dict(base, prompt=prompt)
    slow = Slowloris(srv.port, a.slow, 2.0) if a.slow else None
    stream_one(srv.port, body, [])  # warm-up
    out, threads = [], []
    t0 = time.perf_counter()
    for _ in range(a.clients):
        def client():
            for _ in range(a.requests):
                stream_one(srv.port, body, out)
        threads.append(threading.Thread(target=client))
        threads[-1].start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if slow:
        slow.close()
    ok = [x for x in out if x[0] != "error"]
    ttft = [x[0] * 1e3 for x in ok]
    toks = sum(x[1] for x in ok)
    return {"clients": a.clients, "requests": len(out), "errors": len(out) - len(ok),
            "reuse": a.reuse, "slow_connections": a.slow, "tokens_per_s": round(toks / wall, 1),
            "requests_per_s": round(len(ok) / wall, 2),
            "ttft_ms_p50": round(pct(ttft, 50), 1), "ttft_ms_p99": round(pct(ttft, 99), 1)}


def cmd_slowloris(a, srv):
    slow = Slowloris(srv.port, a.connections, a.interval)
    lat = []
    t_end = time.time() + a.seconds
    while time.time() < t_end:
        lat.append(health_ms(srv.port, timeout=5))
        time.sleep(0.2)
    t0 = time.perf_counter()
    try:
        st, _ = post(srv.port, "/v1/completions", {"prompt": "Once", "max_tokens": 8}, timeout=15)
    except OSError:
        st = "timeout"
    completion_ms = (time.perf_counter() - t0) * 1e3
    slow.close()
    return {"connections": a.connections, "interval_s": a.interval, "probes": len(lat),
            "health_ms_p50": round(pct(lat, 50), 2), "health_ms_max": round(max(lat), 2),
            "health_failed": sum(x == float("inf") for x in lat),
            "completion_status": st, "completion_ms": round(completion_ms, 1),
            "closed_by_server": slow.closed_by_server}


def cmd_chunked(a, srv):
    rss0 = srv.kb("VmRSS")
    srv.reset_peak()
    s = socket.create_connection(("127.0.0.1", srv.port))
    s.sendall(b"POST /v1/chunks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
    piece = b"%x\r\n" % (1 << 20) + b"[" * (1 << 20) + b"\r\n"
    sent, t0 = 0, time.perf_counter()
    s.settimeout(30)
    try:
        while sent < a.mb << 20:
            s.sendall(piece)
            sent += 1 << 20
        s.sendall(b"0\r\n\r\n")
    except OSError:
        pass
    try:
        answer = s.recv(200).decode("latin1")
    except OSError:
        answer = ""
    s.close()
    time.sleep(0.2)
    return {"body_mb": a.mb, "sent_mb": round(sent / 2**20, 1),
            "seconds": round(time.perf_counter() - t0, 2),
            "status": answer[9:12] if answer.startswith("HTTP/1.1") else "closed",
            "peak_rss_growth_mb": round((srv.kb("VmHWM") - rss0) / 1024, 1)}


def cmd_rss(a, srv):
    rows = []
    for mb in a.sizes:
        rss0 = srv.kb("VmRSS")
        srv.reset_peak()
        body = {"prompt": "a" * int(mb * 2**20), "max_tokens": 4}
        t0 = time.perf_counter()
        try:
            st, _ = post(srv.port, "/v1/completions", body, timeout=600)
        except OSError as e:
            st = str(e)
        rows.append({"prompt_mb": mb, "status": st, "seconds": round(time.perf_counter() - t0, 2),
                     "peak_rss_growth_mb": round((srv.kb("VmHWM") - rss0) / 1024, 1)})
    return rows


def metric(port, name):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    for line in c.getresponse().read().decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return float("nan")


def concurrent(port, bodies, path="/v1/completions"):
    """Posts the bodies at once; (wall seconds, completion tokens, statuses)."""
    res = [None] * len(bodies)

    def one(i):
        st, raw = post(port, path, bodies[i], timeout=600)
        res[i] = (st, json.loads(raw) if st == 200 else None)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    tokens = sum(r["usage"]["completion_tokens"] for st, r in res if st == 200)
    return wall, tokens, [st for st, _ in res]


def cmd_sampling(a, srv):
    prompts = ["Once upon a time", "The dog ran", "In a small town", "She opened the door",
               "It was raining", "Tom had a ball", "The sun rose", "A bird sang"]
    arms = {"greedy": {"temperature": 0},
            "sampled": {"temperature": a.temperature, "top_p": a.top_p}}
    rates = {k: [] for k in arms}
    for rep in range(a.reps):
        for name, fields in arms.items():
            bodies = [dict(fields, prompt=prompts[i % len(prompts)], max_tokens=a.max_tokens,
                           seed=rep * 100 + i) for i in range(a.clients)]
            wall, tokens, sts = concurrent(srv.port, bodies)
            if any(st != 200 for st in sts):
                raise RuntimeError(f"{name}: statuses {sts}")
            rates[name].append(tokens / wall)
    out = {k: round(statistics.median(v), 2) for k, v in rates.items()}
    out["sampled_over_greedy"] = round(out["sampled"] / out["greedy"], 3)
    out.update(clients=a.clients, max_tokens=a.max_tokens, reps=a.reps)
    return out


def cmd_choices(a, srv):
    srv.stop()
    prompt = " ".join(["the dog ran to the park"] * (a.prompt_tokens // 6))
    base = {"prompt": prompt, "max_tokens": a.max_tokens, "temperature": 0.8, "top_p": 0.95}
    arms = {"n=1": [dict(base, n=1)], f"n={a.n}": [dict(base, n=a.n)],
            f"{a.n} requests": [dict(base, n=1, seed=i) for i in range(a.n)]}
    out = {}
    for name, bodies in arms.items():
        walls = []
        for _ in range(a.reps):
            s = ServerProc(a.server_cmd)
            try:
                wall, tokens, sts = concurrent(s.port, bodies)
                if any(st != 200 for st in sts):
                    raise RuntimeError(f"{name}: statuses {sts}")
                walls.append(wall)
                pages = metric(s.port, "kamera_kv_pages_used_max")
                page_bytes = metric(s.port, "kamera_kv_page_bytes")
            finally:
                s.stop()
        out[name] = {"seconds": round(statistics.median(walls), 2), "completion_tokens": tokens,
                     "kv_pages_max": int(pages), "kv_mb_max": round(pages * page_bytes / 2**20, 1)}
    return out


SPEC_TOOL_RESULT = (
    '{"status": "ok", "path": "src/serve/scheduler.cpp", "matches": [{"line": 212, "text": '
    '"void Scheduler::loop() {"}, {"line": 230, "text": "for (Job& j : batch) '
    'start_task(std::move(j));"}, {"line": 231, "text": "step_tasks();"}, {"line": 232, '
    '"text": "if (!active_.empty()) decode_step();"}], "elapsed_ms": 41}')


def spec_body(kind, a, rep):
    prompt = ("You are a coding agent. The tool returned:\n" + SPEC_TOOL_RESULT +
              "\nQuote the tool result exactly, then say which line runs the decode step.\n" +
              SPEC_TOOL_RESULT[:60])
    body = {"prompt": prompt, "max_tokens": a.max_tokens, "seed": rep}
    if kind == "copying":
        body["temperature"] = 0
    else:
        body.update(temperature=a.temperature, top_p=a.top_p)
    return body


SPEC_ARMS = ("none", "ngram", "draft", "forced", "forced-text", "ngram+forced", "draft+forced")


def spec_arm(a, m):
    """An arm's server command: none, ngram, draft (--spec-forced off: the reference), forced /
    forced-text (--spec none, --spec-forced on / text), ngram+forced, draft+forced."""
    base, forced = m.split("+")[0], "on" if m.endswith("+forced") else "off"
    if m.startswith("forced"):
        base, forced = "none", "text" if m == "forced-text" else "on"
    cmd = f"{a.server_cmd} --spec-forced {forced}"
    if base == "draft":
        return f"{cmd} --spec draft -md {a.draft} {a.draft_args}"
    return f"{cmd} --spec {base}"


# The tools workload (--workload tools): an agent's turn that must call one of these tools
# (tool_choice "required", one call) or answer in a JSON schema, every argument an enum, a
# bounded integer or a boolean, so a model with random weights writes no free string to the
# token limit.
SPEC_TOOLS = [
    {"type": "function", "function": {
        "name": "read_file", "description": "Read lines of a file of the repository",
        "parameters": {"type": "object", "properties": {
            "path": {"enum": ["src/serve/scheduler.cpp", "src/serve/scheduler_spec.cpp",
                              "docs/SERVER.md", "src/grammar/constraint.cpp"]},
            "line": {"type": "integer", "minimum": 1, "maximum": 999},
            "context": {"enum": ["none", "function", "file"]}},
            "required": ["path", "line", "context"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "run_tests", "description": "Run the project's tests",
        "parameters": {"type": "object", "properties": {
            "label": {"enum": ["unit", "model", "slow"]},
            "filter": {"enum": ["ServerSpec.*", "ForcedRun.*", "ServeBench.*", "*"]},
            "verbose": {"type": "boolean"}},
            "required": ["label", "filter", "verbose"], "additionalProperties": False}}},
]
SPEC_SCHEMA = {"type": "object", "properties": {
    "status": {"enum": ["done", "blocked", "needs_review"]},
    "next_tool": {"enum": ["read_file", "run_tests", "none"]},
    "files_changed": {"type": "integer", "minimum": 0, "maximum": 99},
    "tests_pass": {"type": "boolean"}},
    "required": ["status", "next_tool", "files_changed", "tests_pass"],
    "additionalProperties": False}


def spec_tools_body(kind, a, rep):
    """Request `rep` of the tools workload: even ones call a tool, odd ones answer the schema."""
    msgs = [{"role": "system", "content": "You are a coding agent working on the kamera server."},
            {"role": "user", "content": "The tool returned:\n" + SPEC_TOOL_RESULT +
             "\nFind the line that runs the decode step, then run the server tests."}]
    body = {"messages": msgs, "max_tokens": a.max_tokens, "seed": rep}
    if rep % 2 == 0:
        body.update(tools=SPEC_TOOLS, tool_choice="required", parallel_tool_calls=False)
    else:
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": "status", "strict": True, "schema": SPEC_SCHEMA}}
    if kind == "greedy":
        body["temperature"] = 0
    else:
        body.update(temperature=a.temperature, top_p=a.top_p)
    return body


def spec_round(a, s, kind, rep):
    """a.clients requests at once on server s: (answers with each one's seconds, wall seconds,
    CPU seconds)."""
    if a.workload == "tools":
        route = "/v1/chat/completions"
        bodies = [dict(spec_tools_body(kind, a, rep * a.clients + i), logprobs=True)
                  for i in range(a.clients)]
    else:
        route = "/v1/completions"
        bodies = [dict(spec_body(kind, a, rep * a.clients + i), logprobs=0)
                  for i in range(a.clients)]
    res = [None] * len(bodies)

    def one(i):
        t = time.perf_counter()
        res[i] = post(s.port, route, bodies[i], timeout=600) + (time.perf_counter() - t,)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    t0, c0 = time.perf_counter(), s.cpu_s()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall, cpu = time.perf_counter() - t0, s.cpu_s() - c0
    for st, raw, _ in res:
        if st != 200:
            raise RuntimeError(f"{kind}: {st} {raw[:200]}")
    return [(json.loads(raw), sec) for _, raw, sec in res], wall, cpu


def spec_trace_round(a, s, kind, conv):
    """The assistant turns of one conversation on server s, in order: (answers with each one's
    seconds, wall seconds, CPU seconds)."""
    res, t0, c0 = [], time.perf_counter(), s.cpu_s()
    for k, m in enumerate(conv):
        if m["role"] != "assistant":
            continue
        body = {"messages": conv[:k], "max_tokens": a.max_tokens, "seed": k}
        if kind == "greedy":
            body["temperature"] = 0
        else:
            body.update(temperature=a.temperature, top_p=a.top_p)
        t = time.perf_counter()
        st, raw = post(s.port, "/v1/chat/completions", body, timeout=600)
        if st != 200:
            raise RuntimeError(f"{kind}: {st} {raw[:200]}")
        res.append((json.loads(raw), time.perf_counter() - t))
    return res, time.perf_counter() - t0, s.cpu_s() - c0


def spec_answer_tokens(x):
    lp = x["choices"][0].get("logprobs")
    if lp and "tokens" in lp:
        return lp["tokens"]
    if lp and "content" in lp:  # a chat answer's tokens
        return [t["token"] for t in lp["content"]]
    return [x["choices"][0]["message"]["content"], x["usage"]["completion_tokens"]]


def cmd_spec(a, srv):
    srv.stop()
    if any(m.startswith("draft") for m in a.arms) and not a.draft:
        raise SystemExit("spec: the draft arm needs --draft FILE")
    trace = json.load(open(a.trace)) if a.trace else None
    kinds = ("greedy", "sampled") if trace or a.workload == "tools" else ("copying", "sampled")
    arms = {m: ServerProc(spec_arm(a, m)) for m in a.arms}
    runs, greedy, sampled = {}, {}, {}
    try:
        for rep in range(a.reps):
            for kind in kinds:
                order = list(arms.items())
                shift = rep % len(order)  # each arm first in turn
                for m, s in order[shift:] + order[:shift]:
                    load = os.getloadavg()[0]
                    if trace:
                        answers, wall, cpu = spec_trace_round(a, s, kind, trace[rep % len(trace)])
                    else:
                        answers, wall, cpu = spec_round(a, s, kind, rep)
                    toks = [spec_answer_tokens(x) for x, _ in answers]
                    # greedy: every arm must give the same tokens; sampled: told which do
                    (sampled if kind == "sampled" else greedy).setdefault(rep, {})[m] = toks
                    r = runs.setdefault(kind, {}).setdefault(m, {
                        "tps": [], "total": [], "cpu": [], "load": [], "drafted": 0,
                        "accepted": 0, "forced": 0, "tokens": 0, "turn_s": [], "conv_s": []})
                    tokens = 0
                    for x, sec in answers:
                        u, k = x["usage"], x["usage"]["kamera"]
                        decode_s = sec - k["timings"]["ttft_ms"] / 1e3
                        r["tps"].append((u["completion_tokens"] - 1) / max(decode_s, 1e-3))
                        r["turn_s"].append(sec)
                        tokens += u["completion_tokens"]
                        r["drafted"] += k["speculative"]["drafted"]
                        r["accepted"] += k["speculative"]["accepted"]
                        r["forced"] += k["speculative"].get("forced", 0)
                    r["conv_s"].append(wall)
                    r["total"].append(tokens / wall)
                    r["cpu"].append(tokens / max(cpu, 0.01))
                    r["load"].append(round(load, 2))
                    r["tokens"] += tokens
    finally:
        for s in arms.values():
            s.stop()
    out = spec_summary(a, runs, greedy, kinds[0], bool(trace) or a.workload == "tools")
    out["sampled"]["sampled_tokens_equal"] = {
        m: all(t[m] == t[a.arms[0]] for t in sampled.values()) for m in a.arms[1:]}
    return out


def spec_summary(a, runs, greedy, greedy_kind, traced):
    out = {}
    base = a.arms[0]
    keys = ["decode_tokens_per_s", "tokens_per_s", "tokens_per_cpu_s"]
    for kind, by in runs.items():
        row = {}
        for m, r in by.items():
            row[m] = {"decode_tokens_per_s": round(statistics.median(r["tps"]), 2),
                      "tokens_per_s": round(statistics.median(r["total"]), 2),
                      "tokens_per_cpu_s": round(statistics.median(r["cpu"]), 2),
                      "tokens": r["tokens"], "drafted": r["drafted"], "accepted": r["accepted"],
                      "forced": r["forced"],
                      "forced_share": round(r["forced"] / max(1, r["tokens"]), 3),
                      "load": r["load"]}
            if traced:
                row[m].update(turn_s=round(statistics.median(r["turn_s"]), 4),
                              conversation_s=round(statistics.median(r["conv_s"]), 3),
                              turns=len(r["turn_s"]))
        for m in a.arms[1:]:
            for k in keys:
                row[f"{m}_over_{base}_{k}"] = round(row[m][k] / row[base][k], 3)
            if traced:  # times: the speedup, the base arm's seconds over this arm's
                for k in ("turn_s", "conversation_s"):
                    row[f"{m}_speedup_{k}"] = round(row[base][k] / row[m][k], 3)
        out[kind] = row
    out[greedy_kind]["greedy_tokens_equal"] = all(
        all(t[m] == t[base] for m in a.arms) for t in greedy.values())
    out.update(max_tokens=a.max_tokens, reps=a.reps, clients=a.clients)
    return out


WORDS = ("tool result status page row column value file line error count user order item price "
         "stock query search answer table chart image frame video window agent step plan check "
         "report field record index token cache server client request reply score rank note").split()


def agent_text(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def stream_chat(port, body):
    """One streamed chat completion: (status, reply text, arrival times of its content chunks)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/chat/completions", json.dumps(dict(body, stream=True)),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        return r.status, "", []
    text, times = [], []
    for line in r:
        if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
            continue
        ch = json.loads(line[6:])
        for choice in ch.get("choices", []):
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                text.append(piece)
                times.append(time.perf_counter())
    c.close()
    return 200, "".join(text), times


def cmd_agents(a, srv):
    """--agents concurrent agents, --turns turns each, every turn resending the whole
    conversation: a system prompt and a --words word task of its own, then per turn the
    assistant's reply and an observation of --obs-words words (a tool loop's shape)."""
    import random
    convs = []
    for i in range(a.agents):
        rng = random.Random(1000 + i)
        convs.append((rng, [{"role": "system", "content": f"You are agent {i}. Use the tools."},
                            {"role": "user", "content": agent_text(rng, a.words)}]))
    base = {"max_tokens": a.max_tokens, "temperature": a.temperature, "seed": 7}
    stream_chat(srv.port, dict(base, messages=[{"role": "user", "content": "warm up"}]))
    ttft, gaps, tokens, errors, by_turn = [], [], [0], [0], ([], [])
    lock, start = threading.Lock(), threading.Barrier(a.agents)
    turns = []  # --verbose: (agent, turn, sent, first token, last token) in ms from the start

    def agent(i, rng, msgs):
        start.wait()
        for turn in range(a.turns):
            t0 = time.perf_counter()
            st, reply, times = stream_chat(srv.port, dict(base, messages=msgs))
            with lock:
                if st != 200 or not times:
                    errors[0] += 1
                    return
                turns.append((i, turn, round((t0 - wall0) * 1e3), round((times[0] - wall0) * 1e3),
                              round((times[-1] - wall0) * 1e3), len(times)))
                ttft.append(times[0] - t0)
                by_turn[min(turn, 1)].append((times[0] - t0) * 1e3)
                gaps.extend(y - x for x, y in zip(times, times[1:]))
                tokens[0] += len(times)
            msgs += [{"role": "assistant", "content": reply},
                     {"role": "user", "content": "Observation: " + agent_text(rng, a.obs_words)}]

    threads = [threading.Thread(target=agent, args=(i, *c)) for i, c in enumerate(convs)]
    cpu0, t0 = srv.cpu_s(), time.perf_counter()
    wall0 = t0
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall, cpu = time.perf_counter() - t0, srv.cpu_s() - cpu0
    ms = [x * 1e3 for x in ttft]
    return {"agents": a.agents, "turns": a.turns, "errors": errors[0], "wall_s": round(wall, 2),
            "completion_tokens": tokens[0], "tokens_per_s": round(tokens[0] / wall, 1),
            "tokens_per_cpu_s": round(tokens[0] / max(cpu, 1e-9), 1),
            "ttft_ms_p50": round(pct(ms, 50), 1), "ttft_ms_p99": round(pct(ms, 99), 1),
            "ttft_ms_max": round(max(ms, default=float("nan")), 1),
            "ttft_max_over_p50": round(max(ms, default=0) / max(pct(ms, 50), 1e-9), 2),
            "gap_ms_p50": round(pct(gaps, 50) * 1e3, 1), "gap_ms_p99": round(pct(gaps, 99) * 1e3, 1),
            "first_turn_ttft_ms_p50": round(pct(by_turn[0], 50), 1),
            "first_turn_ttft_ms_max": round(max(by_turn[0], default=float("nan")), 1),
            "later_ttft_ms_p50": round(pct(by_turn[1], 50), 1),
            "later_ttft_ms_max": round(max(by_turn[1], default=float("nan")), 1),
            **({"first_turn_ttft_ms": sorted(round(x) for x in by_turn[0]),
                "turns": sorted(turns, key=lambda t: (t[1], t[2]))} if a.verbose else {})}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--server-cmd", required=True, help="command line, {port} is replaced")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("load")
    s.add_argument("--clients", type=int, default=32)
    s.add_argument("--requests", type=int, default=4)
    s.add_argument("--max-tokens", type=int, default=32)
    s.add_argument("--reuse", action="store_true")
    s.add_argument("--slow", type=int, default=0)
    s = sub.add_parser("slowloris")
    s.add_argument("--connections", type=int, default=64)
    s.add_argument("--interval", type=float, default=2.0)
    s.add_argument("--seconds", type=float, default=10.0)
    s = sub.add_parser("chunked")
    s.add_argument("--mb", type=int, default=1024)
    s = sub.add_parser("rss")
    s.add_argument("--sizes", type=float, nargs="+", default=[0.01, 1, 4, 16, 30])
    s = sub.add_parser("sampling")
    s.add_argument("--clients", type=int, default=8)
    s.add_argument("--max-tokens", type=int, default=32)
    s.add_argument("--temperature", type=float, default=0.8)
    s.add_argument("--top-p", type=float, default=0.95)
    s.add_argument("--reps", type=int, default=3)
    s = sub.add_parser("spec")
    s.add_argument("--max-tokens", type=int, default=128)
    s.add_argument("--temperature", type=float, default=0.8)
    s.add_argument("--top-p", type=float, default=0.95)
    s.add_argument("--reps", type=int, default=3)
    s.add_argument("--clients", type=int, default=1)
    s.add_argument("--arms", nargs="+", default=["none", "ngram"], choices=SPEC_ARMS)
    s.add_argument("--draft", default="", help="the draft arm's model file")
    s.add_argument("--draft-args", default="", help="more server flags of the draft arm")
    s.add_argument("--trace", default="", help="conversations to replay turn by turn (JSON)")
    s.add_argument("--workload", choices=["copying", "tools"], default="copying",
                   help="tools: chat turns that must call a tool or answer a JSON schema")
    s = sub.add_parser("choices")
    s.add_argument("--n", type=int, default=8)
    s.add_argument("--prompt-tokens", type=int, default=512)
    s.add_argument("--max-tokens", type=int, default=32)
    s.add_argument("--reps", type=int, default=1)
    s = sub.add_parser("agents")
    s.add_argument("--agents", type=int, default=4)
    s.add_argument("--turns", type=int, default=3)
    s.add_argument("--words", type=int, default=150)
    s.add_argument("--obs-words", type=int, default=30)
    s.add_argument("--max-tokens", type=int, default=48)
    s.add_argument("--temperature", type=float, default=0.0)
    s.add_argument("--verbose", action="store_true", help="every first turn's TTFT too")
    a = p.parse_args()
    srv = ServerProc(a.server_cmd)
    try:
        res = {"load": cmd_load, "slowloris": cmd_slowloris, "chunked": cmd_chunked,
               "rss": cmd_rss, "sampling": cmd_sampling, "choices": cmd_choices,
               "spec": cmd_spec, "agents": cmd_agents}[a.cmd](a, srv)
    finally:
        srv.stop()
    print(json.dumps(res))


if __name__ == "__main__":
    main()
