#!/usr/bin/env python3
"""`kamera chat` on a terminal (a pty, as a person types): the banner, line editing and history
(Up recalls the last message), -v's reuse statistics per turn, Ctrl-C that stops a reply and keeps
the conversation, /save and /load of the conversation, Ctrl-C at the prompt that exits, and a
thinking template's reasoning printed dimmed, every line prefixed by "| ".

    tests/cli/chat_repl.py --kamera build/bin/kamera

The model is a tiny random-weight qwen2 from `kamera make-model`, with the chatml template.
"""
import argparse
import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time

p = argparse.ArgumentParser()
p.add_argument("--kamera", required=True)
args = p.parse_args()

tmp = tempfile.mkdtemp(prefix="kamera-chat-pty-")
model = os.path.join(tmp, "chat.gguf")
subprocess.run([args.kamera, "make-model", "--arch", "qwen2", "--preset", "tiny", "--dims", "ctx=8192",
                "--seed", "5", "-o", model], check=True, stdout=subprocess.DEVNULL)
history = os.path.join(tmp, "history")
saved = os.path.join(tmp, "conversation.json")

pid, fd = pty.fork()
if pid == 0:
    os.execv(args.kamera, [args.kamera, "chat", "-m", model, "--chat-template", "chatml", "--temp", "0",
                           "-n", "1000", "-t", "1", "-v", "--history", history])

out = b""
pos = 0  # what the test has looked at so far
failures = []


def read_until(needle, timeout=30.0):
    """Reads the terminal until `needle` appears past what was looked at; returns the text up to
    and including it."""
    global out, pos
    deadline = time.time() + timeout
    while True:
        at = out.find(needle.encode(), pos)
        if at >= 0:
            text = out[pos:at + len(needle)].decode(errors="replace")
            pos = at + len(needle)
            return text
        if time.time() > deadline:
            raise TimeoutError(f"no {needle!r} within {timeout} s; the terminal shows:\n"
                               f"{out[-3000:].decode(errors='replace')}")
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                raise TimeoutError(f"the terminal closed before {needle!r}")
            out += chunk


def reused_of(text):
    """The reused count of -v's line: "turn N: prompt P tokens, R reused from the cache"."""
    m = re.search(r"turn \d+: prompt (\d+) tokens, (\d+) reused", text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, -1)


def send(keys):
    os.write(fd, keys.encode())


def expect(ok, what):
    if not ok:
        failures.append(what)


try:
    banner = read_until("> ")
    for word in ("model", "chat.gguf", "template", "context", "threads 1", "/save FILE", "Ctrl-C"):
        expect(word in banner, f"the banner names {word!r}:\n{banner}")
    send("hello there\r")
    read_until("kamera: turn 1:")
    read_until("> ")
    send("\x1b[A")  # Up: the last message comes back to be edited or sent again
    read_until("hello there", timeout=5)
    send("\r")
    turn2 = read_until("kamera: turn 2:") + read_until("> ")
    expect(reused_of(turn2)[1] > 0, f"turn 2 reuses the first turn from the cache: {turn2[-300:]!r}")
    # A long reply, stopped by Ctrl-C once it has begun: the prompt comes back, the chat goes on.
    send("tell me a long story\r")
    read_until("story")
    read_until("\n")
    time.sleep(0.05)
    send("\x03")
    stopped = read_until("kamera: turn 3:") + read_until("> ")
    expect("reply stopped" in stopped and "(stopped)" in stopped,
           f"Ctrl-C stops the reply and says so: {stopped[-400:]!r}")
    send(f"/save {saved}\r")
    read_until("> ")
    conv = json.load(open(saved))["messages"]
    roles = [m["role"] for m in conv]
    expect(roles == ["user", "assistant"] * 3, f"/save writes the three turns: {roles}")
    expect(len(conv) == 6 and conv[0]["content"] == "hello there" and conv[5]["content"] != "",
           "the stopped reply is kept in the conversation")
    send("/reset\r")
    read_until("> ")
    send(f"/load {saved}\r")
    loaded = read_until("> ")
    expect("6 messages" in loaded, f"/load reads the conversation back: {loaded!r}")
    send("and then?\r")
    turn4 = read_until("kamera: turn 4:") + read_until("> ")
    expect(reused_of(turn4)[1] > 30, f"the loaded conversation is served from the cache as a prefix: {turn4[-300:]!r}")
    send("\x03")  # at the prompt: leaves
    deadline = time.time() + 10
    status = None
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    expect(status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 130,
           f"Ctrl-C at the prompt exits with 130 (status {status})")
    kept = open(history).read()
    expect("hello\\040there" in kept or "hello there" in kept, f"the history file keeps the messages: {kept!r}")
    # A new session on the same history file: Up brings back the last message of the previous one.
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(args.kamera, [args.kamera, "chat", "-m", model, "--chat-template", "chatml", "-n", "4",
                               "--history", history])
    out, pos = b"", 0
    read_until("> ")
    send("\x1b[A")
    read_until("and then?", timeout=5)
    send("\x03")
    # A thinking template (Qwen3's, opening <think> in the generation prompt): the reply starts
    # inside the reasoning, which a terminal shows dimmed, prefixed, above the answer.
    fixture = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures",
                           "chat_templates", "templates", "qwen3.jinja")
    src, opening = open(fixture).read(), "{{- '<|im_start|>assistant\\n' }}"
    at = src.rfind(opening)
    thinking = os.path.join(tmp, "thinking.jinja")
    open(thinking, "w").write(src[:at] + "{{- '<|im_start|>assistant\\n<think>\\n' }}" +
                              src[at + len(opening):])
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(args.kamera, [args.kamera, "chat", "-m", model, "--chat-template", thinking,
                               "--temp", "0", "-n", "12", "-t", "1", "--history", ""])
    out, pos = b"", 0
    read_until("> ")
    send("What is 2 + 2?\r")
    shown = read_until("\x1b[0m")
    expect("\x1b[2m| " in shown and "<think>" not in shown,
           f"the reasoning is dimmed and prefixed by '| ': {shown[-300:]!r}")
    send("\x03")
except Exception as e:  # noqa: BLE001
    failures.append(f"error: {e}")
finally:
    try:
        os.kill(pid, 9)
    except OSError:
        pass
if failures:
    print("FAIL: kamera chat on a terminal:\n  " + "\n  ".join(failures))
    sys.exit(1)
shutil.rmtree(tmp, ignore_errors=True)
print("PASS: kamera chat on a terminal (banner, history, -v, Ctrl-C, /save, /load, reasoning)")
