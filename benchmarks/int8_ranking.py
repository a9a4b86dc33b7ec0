"""int8's ranking cost, not only its cosine (issue 33 item 3): MAP over the labelled queries of a variant that reads
channel S (default params' Szs+L: the zero-shot encoder and BM25, nothing trained), with S encoded by torch, onnx and
onnx int8, each against torch by the paired test over queries (ticketsim.training.selection.paired_test).

Usage:
  python benchmarks/int8_ranking.py [--variant Szs+L] [--tickets 1000] [--threads 2] [--model FOLDER]

The corpus is the synthetic generator's (params' synthetic and seed; --tickets overrides its size), every labelled
pair of every split scored (a variant with labels: false sees none of them; a trained variant would train on the train
split first). Prints MAP and MRR per backend, the mean AP difference to torch with its 95 % bootstrap interval and
sign-flip p, and how far each backend's S vectors are from torch's.
"""
import argparse
import os
import time
from dataclasses import replace

import numpy as np

from ticketsim.channels.sentence import sentence_channel
from ticketsim.config import load_params
from ticketsim.data.synthetic import generate
from ticketsim.evaluate.protocols import rerank_means
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus
from ticketsim.training.selection import paired_test, per_query
from ticketsim.training.variant import prepare, train_variant

BACKENDS = {"torch": ("torch", "none"), "onnx": ("onnx", "none"), "onnx int8": ("onnx", "int8")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variant", default="Szs+L", help="a name in params' siamese.variants")
    parser.add_argument("--tickets", type=int, help="synthetic.n_tickets (default params')")
    parser.add_argument("--threads", type=int, help="sentence.threads (default params')")
    parser.add_argument("--model", help="sentence.model (default params')")
    args = parser.parse_args()
    params = load_params()
    synthetic = replace(params.synthetic, n_tickets=args.tickets or params.synthetic.n_tickets)
    corpus = generate(synthetic, params.seed)
    tokens = tokenize_corpus(corpus, make_tokenizer(params.text, corpus), progress=False)
    variant = params.siamese.variant(args.variant)
    rows, vectors, ap = {}, {}, {}
    for name, (backend, quantize) in BACKENDS.items():
        cfg = replace(params.sentence, backend=backend, quantize=quantize, threads=args.threads or params.sentence.threads,
                      model=args.model or params.sentence.model)
        started = time.perf_counter()
        s = sentence_channel(corpus, cfg, progress=False)[0]
        seconds = time.perf_counter() - started
        # no word vectors: the variant weighs no h or E (one zero column each for the LSTM's unused table)
        data = prepare(params, tokens, [s], lambda words: np.zeros((len(words), 2), np.float32), 1, [variant], corpus)
        by_query = per_query(data.pairs, train_variant(data, variant, params.seed).pair_scores(), params.evaluation.depth)
        ap[name] = {q: a for q, a in zip(by_query["query_id"], by_query["ap"].fill_null(np.nan))}
        vectors[name] = np.concatenate([*s.queries.values(), *s.tickets.values()])
        rows[name] = {**rerank_means(by_query), "seconds": seconds}
        print(f"{name}: MAP {rows[name]['map']:.4f} ({seconds:.0f} s encoding)", flush=True)
    print(f"\n{args.variant} ({cfg.model}) on the synthetic corpus ({synthetic.n_tickets} tickets, seed {params.seed}), "
          f"{len(ap['torch'])} queries with labelled pairs, S on {cfg.threads} threads; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| S encoded by | MAP | MRR | AP - torch's, mean | 95 % interval | p | max abs diff of S to torch | min cosine |\n"
          "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    for name, row in rows.items():
        test = paired_test(ap[name], ap["torch"]) if name != "torch" else None
        a, b = vectors[name], vectors["torch"]
        cosine = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
        cosine = cosine[np.linalg.norm(b, axis=1) > 0]
        versus = (f"{test['mean_difference']:+.4f} | [{test['interval'][0]:+.4f}, {test['interval'][1]:+.4f}] | {test['p']:.3f}"
                  if test else "- | - | -")
        print(f"| {name} | {row['map']:.4f} | {row['mrr']:.4f} | {versus} | {np.abs(a - b).max():.1e} | {cosine.min():.4f} |")


if __name__ == "__main__":
    main()
