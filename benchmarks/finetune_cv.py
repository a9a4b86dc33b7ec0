"""`ticketsim select`'s cross-validation for the fine-tuned encoder's rows, run where a GPU is: on 2 cores one F model
takes minutes, and a comparison needs k folds x 3 seeds of them per configuration.

Usage (pack here, run on the GPU machine, merge here):
  python benchmarks/finetune_cv.py pack DATASET prepared.pkl --variants Szs+L A+L F+L Fc+L
  python benchmarks/finetune_cv.py run prepared.pkl MODEL_FOLDER --seeds 0 1 2 --folds 5 --out FOLDER [--budget 330]
  ticketsim select --merge FOLDER/seed0.json FOLDER/seed1.json FOLDER/seed2.json --out select.json
A GPU has room for every seed at once: one process per seed (`--seeds 0 &`, `--seeds 1 &`, ...) takes about the time
of one, as a model's time is mostly the CPU's (tokenizing, the loop), not the GPU's.

pack: the dataset's prepared corpus and tokens (stage prepare's outputs) and params, pickled (a few MB). run: where
only torch, transformers, sentence-transformers, numpy and the carried polars, bm25s and ir_measures are installed:
channel S of every component from MODEL_FOLDER on `sentence.device` (seconds on a GPU, an hour on 2 loaded cores), the
inputs `ticketsim select` builds (training.variant.prepare on the train, dev and lay pairs; no word vectors: these rows
weigh no h), F starting from MODEL_FOLDER (a float16 copy, benchmarks/half_weights.py, is cast back to float32), then for
each seed until --budget seconds have passed `ticketsim select`'s report (training.selection_report.select: every
configuration cross-validated, and trained on train + dev and scored on the lay split, BM25 and S's zero-shot row beside
them, the judgement against siamese.unlabelled) in FOLDER/seed<N>.json; for SemEval both of its shifts (pack reads the
train parts of the cross-part shift from the XML files).
"""
import argparse
import json
import os
import pickle
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
# bm25s imports jax where it is installed, and jax takes 75% of the GPU's memory at import: seeds run side by side
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import torch  # noqa: E402

from ticketsim.config import load_params, stage_paths  # noqa: E402
from ticketsim.data.tables import LAY, Corpus  # noqa: E402
from ticketsim.text.tokenize import Tokens  # noqa: E402
from ticketsim.training.selection_report import markdown, select  # noqa: E402
from ticketsim.training.shift import THREADED, shifts_of  # noqa: E402
from ticketsim.training.variant import CHOICE_SPLITS, prepare  # noqa: E402

WORD_DIM, CHAR_DIM = 300, 50      # an unused word table's width: these rows weigh no h


def pack(args: argparse.Namespace) -> None:
    files = stage_paths("tune", args.dataset)
    params = load_params("params.yaml")
    dataset = params.dataset(args.dataset)
    packed = {"dataset": args.dataset, "source": dataset.source, "params": params,
              "variants": list(dict.fromkeys([*args.variants, params.siamese.unlabelled])),   # the reference, as select
              "corpus": Corpus.read(files["corpus"]), "tokens": Tokens.read(files["tokens"]), "parts": {}}
    if dataset.source in THREADED:    # the cross-part shift's train parts, read here where the SemEval files are
        from ticketsim.data.semeval import train_parts

        packed["parts"] = train_parts(dataset)
    args.out.write_bytes(pickle.dumps(packed))
    print(f"{args.out}: {args.out.stat().st_size / 1e6:.1f} MB")


def run(args: argparse.Namespace) -> None:
    import numpy as np

    from ticketsim.channels.sentence import sentence_channel

    started = time.perf_counter()
    packed = pickle.loads(args.packed.read_bytes())
    params = packed["params"]
    params = replace(params, sentence=replace(params.sentence, model=str(args.model)))
    s_vectors, _ = sentence_channel(packed["corpus"], params.sentence)
    print(f"channel S: {time.perf_counter() - started:.0f} s", flush=True)
    problem = prepare(params, packed["tokens"], [s_vectors], lambda words: np.zeros((len(words), WORD_DIM + CHAR_DIM)),
                      CHAR_DIM, [params.siamese.variant(name) for name in packed["variants"]], packed["corpus"],
                      splits=(*CHOICE_SPLITS, LAY))
    if problem.start is not None and problem.start.encoder is not None:
        problem = replace(problem, start=replace(problem.start, encoder=problem.start.encoder.float()))
    print(f"torch {torch.__version__}, device {problem.start.cfg.device}, "
          f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'no CUDA'}", flush=True)
    done = []
    args.out.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:      # one select report per seed: `ticketsim select --merge` makes one of them
        if time.perf_counter() - started > args.budget:
            print(f"budget of {args.budget} s spent: seeds {done} done", flush=True)
            break
        seed_started = time.perf_counter()
        shifts = shifts_of(problem, packed["source"], packed.get("parts", {}))
        report = select(problem, packed["variants"], shifts, args.folds, [seed], 1, None, True, args.resamples)
        report |= {"dataset": packed["dataset"], "seconds": round(time.perf_counter() - seed_started, 1)}
        (args.out / f"seed{seed}.json").write_text(json.dumps(report, indent=2) + "\n")
        print(markdown(report), flush=True)
        done.append(seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    packing = commands.add_parser("pack")
    packing.add_argument("dataset")
    packing.add_argument("out", type=Path)
    packing.add_argument("--variants", nargs="+", required=True)
    running = commands.add_parser("run")
    running.add_argument("packed", type=Path)
    running.add_argument("model", type=Path)
    running.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    running.add_argument("--folds", type=int, default=5)
    running.add_argument("--budget", type=float, default=330, help="seconds after which no further seed starts")
    running.add_argument("--out", type=Path, required=True, help="a folder: one select report per seed")
    running.add_argument("--resamples", type=int, default=10_000)
    args = parser.parse_args()
    {"pack": pack, "run": run}[args.command](args)


if __name__ == "__main__":
    main()
