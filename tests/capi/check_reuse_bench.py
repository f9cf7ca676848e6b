#!/usr/bin/python3
"""Runs `kamera reuse-bench` on one item and a public-API program on the same item, which must
reproduce the bench's per-item KLs of the patch arm (rank m) and of blind reuse.

  check_reuse_bench.py --kamera build/bin/kamera --model stories260K.gguf \
      --items data/reuse-stories260K.jsonl --item 0 --rank 8 --scratch DIR -- <program> [args]

The program is called as `<program> [args] <model> <antecedent> <chunk> <query> <rank>
<patch item_kl> <blind item_kl>` and its exit status is returned. Exits 77 (ctest: skipped) when
the model file is absent.
"""
import argparse
import json
import os
import subprocess
import sys


def bench_item_kls(kamera, model, item, rank, scratch):
    path = os.path.join(scratch, "reuse-item.jsonl")
    with open(path, "w") as f:
        f.write(json.dumps(item) + "\n")
    out = subprocess.run(
        [kamera, "reuse-bench", "-m", model, "--items", path, "--ranks", str(rank),
         "--no-deep-half", "--quiet", "--json", "-t", "2"],
        check=True, capture_output=True, text=True).stdout
    arms = json.loads(out)["arms"]
    patch = [a for a in arms if a["name"] == "patch" and a["rank"] == rank]
    blind = [a for a in arms if a["name"] == "blind"]
    assert len(patch) == 1 and len(blind) == 1, "reuse-bench JSON lacks the patch or blind arm"
    return patch[0]["item_kl"][0], blind[0]["item_kl"][0]


def main():
    p = argparse.ArgumentParser()
    for opt in ("--kamera", "--model", "--items", "--scratch"):
        p.add_argument(opt, required=True)
    p.add_argument("--item", type=int, default=0)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("program", nargs=argparse.REMAINDER)
    a = p.parse_args()
    if not os.path.exists(a.model):
        print(f"skipped: {a.model} is absent (../shared/models is provided in CI)")
        return 77
    with open(a.items) as f:
        item = json.loads([line for line in f if line.strip()][a.item])
    patch_kl, blind_kl = bench_item_kls(a.kamera, a.model, item, a.rank, a.scratch)
    prog = [x for x in a.program if x != "--"]
    cmd = prog + [a.model, item["antecedent"], item["chunk"], item["query"], str(a.rank),
                  repr(patch_kl), repr(blind_kl)]
    return subprocess.run(cmd).returncode


if __name__ == "__main__":
    sys.exit(main())
