"""Pretrained English Punkt vs Punkt trained on the corpus: agreement, sentence counts and time, side by side.

Usage: python benchmarks/punkt_compare.py data/default/prepared data/semeval/prepared
"""
import sys
import time

from ticketsim.data.tables import Corpus
from ticketsim.text.tokenize import corpus_texts, pretrained_punkt, trained_punkt


def compare(folder: str) -> None:
    texts = [t for t in corpus_texts(Corpus.read(folder)) if t.strip()]
    start = time.perf_counter()
    trained = trained_punkt(texts)
    train_seconds = time.perf_counter() - start
    splits = {}
    for name, splitter in (("pretrained", pretrained_punkt()), ("trained", trained)):
        start = time.perf_counter()
        splits[name] = [splitter.tokenize(t) for t in texts]
        print(f"{folder}: {name:10s} {sum(map(len, splits[name])):7d} sentences in {time.perf_counter() - start:5.2f} s")
    same = sum(a == b for a, b in zip(splits["pretrained"], splits["trained"]))
    print(f"{folder}: trained in {train_seconds:.2f} s; identical splits for {same}/{len(texts)} texts ({same / len(texts):.1%}); "
          f"sentences trained/pretrained = {sum(map(len, splits['trained'])) / sum(map(len, splits['pretrained'])):.3f}")
    differing = [(a, b) for a, b in zip(splits["pretrained"], splits["trained"]) if a != b]
    for a, b in differing[:3]:
        print("  pretrained:", a[:4], "\n  trained:   ", b[:4])


if __name__ == "__main__":
    for folder in sys.argv[1:] or ["data/default/prepared", "data/semeval/prepared"]:
        compare(folder)
