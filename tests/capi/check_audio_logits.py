#!/usr/bin/python3
"""Takes the next-token logits after a clip from `kamera logits --mmproj --audio --json` on the
committed tiny Qwen2.5-Omni pair (tests/data/qwen25o: the CLI's own path: decode, 16 kHz, log-mel,
encode, place between <|audio_bos|> and <|audio_eos|>, prefill), and runs a public-API program
that must reproduce them through kamera_chunk_from_audio.

  check_audio_logits.py --kamera build/bin/kamera --scratch DIR -- <program>

The program is called as `<program> <decoder> <mmproj> <clip> <reference file> <scratch>
<picture mmproj> <picture>`; the reference file holds three lines: the token ids before the clip,
those after it, and the logits. Its exit status is returned.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
PROMPT = "<|im_start|>user\n<|audio_bos|><audio><|audio_eos|>the<|im_end|>\n<|im_start|>assistant\n"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kamera", required=True)
    p.add_argument("--scratch", required=True)
    p.add_argument("program", nargs=argparse.REMAINDER)
    a = p.parse_args()
    os.makedirs(a.scratch, exist_ok=True)
    shutil.rmtree(os.path.join(a.scratch, "audio-store"), ignore_errors=True)
    d = os.path.join(DATA, "qwen25o")
    dec, mm, clip = (os.path.join(d, f) for f in ("decoder.gguf", "mmproj.gguf", "clip_16k.wav"))
    out = subprocess.run([a.kamera, "logits", "-m", dec, "--mmproj", mm, "--audio", clip, "-t", "1",
                          "--json", "-p", PROMPT], check=True, capture_output=True, text=True)
    j = json.loads(out.stdout)
    pieces = j["pieces"]
    assert len(pieces) == 3 and pieces[1].get("audio_rows") == 750, f"unexpected pieces {pieces}"
    ref = os.path.join(a.scratch, "capi-audio-reference.txt")
    with open(ref, "w") as f:
        f.write(" ".join(map(str, pieces[0]["tokens"])) + "\n")
        f.write(" ".join(map(str, pieces[2]["tokens"])) + "\n")
        f.write(" ".join(repr(float(x)) for x in j["logits"][0]) + "\n")
    prog = [x for x in a.program if x != "--"]
    llava = os.path.join(DATA, "llava")
    return subprocess.run(prog + [dec, mm, clip, ref, a.scratch,
                                  os.path.join(llava, "mmproj.gguf"),
                                  os.path.join(llava, "img_32.png")]).returncode


if __name__ == "__main__":
    sys.exit(main())
