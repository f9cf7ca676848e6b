#!/usr/bin/python3
"""Writes a tiny random-weight Qwen2-VL (--arch qwen3vl: Qwen3-VL; --arch kimivl: Kimi-VL's
deepseek2 decoder and MoonViT, whose random vocabulary has no delimiters: "look <image> now")
decoder and mmproj with `kamera make-model` (--arch idefics3, gemma3, internvl, llava: the
committed tiny pair of tests/data/<arch>, with its family's delimiters in the prompt), takes the
next-token logits after "look <|vision_start|><image><|vision_end|> now" from `kamera logits
--mmproj --image --json` (the CLI's own path: decode, preprocess, encode, place, prefill), and runs
a public-API program that must reproduce them through kamera_chunk_from_image.

  check_image_logits.py --kamera build/bin/kamera --image img.png --scratch DIR -- <program>

The program is called as `<program> <decoder> <mmproj> <image> <reference file> <scratch>`; the
reference file holds three lines: the token ids before the image, those after it, and the
logits. Its exit status is returned.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

PROMPT = "look <|vision_start|><image><|vision_end|> now"


# arch -> (decoder arch, its preset), (mmproj arch, its preset), prompt
PAIRS = {
    "qwen2vl": (("qwen2vl", "tiny"), ("qwen2vl-mmproj", "tiny"), PROMPT),
    "qwen3vl": (("qwen3vl", "tiny"), ("qwen3vl-mmproj", "tiny"), PROMPT),
    "kimivl": (("deepseek2", "kimi-vl-tiny"), ("kimivl-mmproj", "tiny"), "look <image> now"),
}


# The committed tiny pairs (tests/data/<arch>/decoder.gguf and mmproj.gguf, written by llama.cpp's
# gguf-py: their READMEs) -> the prompt, with the family's delimiters where it has them
COMMITTED = {
    "idefics3": "look <image> now",  # the tiles carry their own tokens
    "gemma3": "look <start_of_image><image><end_of_image> now",
    "internvl": "look <img><image></img> now",
    "llava": "look <image> now",  # the rows stand alone
}
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")


def make_pair(kamera, scratch, arch):
    if arch in COMMITTED:
        return (os.path.join(DATA, arch, "decoder.gguf"), os.path.join(DATA, arch, "mmproj.gguf"))
    dec = os.path.join(scratch, "capi-image-dec.gguf")
    mm = os.path.join(scratch, "capi-image-mmproj.gguf")
    for (a, preset), seed, path in zip(PAIRS[arch][:2], ("3", "4"), (dec, mm)):
        subprocess.run([kamera, "make-model", "--arch", a, "--preset", preset, "--seed", seed,
                        "-o", path], check=True, capture_output=True)
    return dec, mm


def cli_reference(kamera, dec, mm, image, prompt):
    out = subprocess.run([kamera, "logits", "-m", dec, "--mmproj", mm, "--image", image, "-t", "1",
                          "--json", "-p", prompt], check=True, capture_output=True, text=True)
    j = json.loads(out.stdout)
    pieces = j["pieces"]
    assert len(pieces) == 3 and "image_rows" in pieces[1], f"unexpected pieces {pieces}"
    return pieces[0]["tokens"], pieces[2]["tokens"], j["logits"][0]


def main():
    p = argparse.ArgumentParser()
    for opt in ("--kamera", "--image", "--scratch"):
        p.add_argument(opt, required=True)
    p.add_argument("--arch", default="qwen2vl", choices=sorted(PAIRS) + sorted(COMMITTED),
                   help="the pair: qwen2vl, qwen3vl or kimivl (made by make-model), or idefics3, "
                        "gemma3, internvl or llava (committed under tests/data)")
    p.add_argument("program", nargs=argparse.REMAINDER)
    a = p.parse_args()
    os.makedirs(a.scratch, exist_ok=True)
    shutil.rmtree(os.path.join(a.scratch, "image-store"), ignore_errors=True)
    dec, mm = make_pair(a.kamera, a.scratch, a.arch)
    prompt = COMMITTED[a.arch] if a.arch in COMMITTED else PAIRS[a.arch][2]
    before, after, logits = cli_reference(a.kamera, dec, mm, a.image, prompt)
    ref = os.path.join(a.scratch, "capi-image-reference.txt")
    with open(ref, "w") as f:
        f.write(" ".join(map(str, before)) + "\n")
        f.write(" ".join(map(str, after)) + "\n")
        f.write(" ".join(repr(float(x)) for x in logits) + "\n")
    prog = [x for x in a.program if x != "--"]
    return subprocess.run(prog + [dec, mm, a.image, ref, a.scratch]).returncode


if __name__ == "__main__":
    sys.exit(main())
