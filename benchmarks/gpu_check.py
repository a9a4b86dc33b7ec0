"""One F epoch and the encoding of many passages on cuda and on the CPU side by side, on a bare GPU machine.

Usage:
  python -m benchmarks.gpu_check MODEL_FOLDER [--pairs 3000] [--passages 20000] [--cpu-passages 2000] [--params params.yaml]

Needs only torch, transformers, sentence-transformers and numpy (PyYAML comes with transformers): the project's src
is put on sys.path, and the encoder and training core (ticketsim.channels.sentence, ticketsim.model, ticketsim.training.trainer)
import no polars, MLflow or DVC. MODEL_FOLDER is a sentence-transformers folder, e.g. the float16 copy of MiniLM that
`python -m benchmarks.encoding half` writes (45 MB to carry); its weights are cast to float32 on load, so both devices
start from the same numbers.

- F: params' variant F (its metric, pairwise loss, AdamW settings, siamese.encoder's max_tokens, frozen layers and chunk
  size) trained for one epoch by ticketsim.training.trainer.fit through ticketsim.model's Siamese network and TransformerBranch,
  on a synthetic set of --pairs pairs (queries in lay words, each with its ticket and five others; a tenth held out
  for the dev loss that fit computes each epoch, counted in the epoch's seconds).
- Encoding: --passages synthetic ticket passages of about 200 words (most fill MiniLM's 256 word pieces), through
  channel S's encode_passages (longest first; on cuda batches of 256 under float16 autocast, on the CPU of 32).

Prints per device seconds per epoch and passages/s, then the largest absolute difference and the lowest cosine between
the cuda and the CPU vectors of the first --cpu-passages passages (the CPU encodes only those: at its rate all of them
would take the GPU machine's whole lease). Without CUDA the cuda part is skipped, with a line saying so.
"""
import argparse
import os
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from ticketsim.channels.sentence import encode_passages, load_encoder  # noqa: E402
from ticketsim.config import load_params  # noqa: E402
from ticketsim.model.branches import TransformerBranch  # noqa: E402
from ticketsim.model.losses import loss_of
from ticketsim.model.siamese import SiameseConfig, SiameseLSTM  # noqa: E402
from ticketsim.scoring.weights import MetricConfig  # noqa: E402
from ticketsim.training.trainer import fit, rescale  # noqa: E402

EQUIPMENT = ["pump", "printer", "laptop", "router", "valve", "compressor", "scanner", "badge reader", "VPN client",
             "mail server", "conveyor", "boiler", "monitor", "docking station", "label printer", "PLC"]
FAULTS = ["leaks oil at the seal", "jams in tray 2", "will not boot after the update", "drops the connection hourly",
          "sticks half open", "overheats under load", "shows error E{n}", "rejects valid badges", "freezes at login",
          "queues mail without sending", "slips at the drive belt", "loses pressure overnight"]
ACTIONS = ["replaced the seal kit", "cleared the paper path and cleaned the rollers", "rolled back driver {n}",
           "renewed the DHCP lease and updated the firmware", "cleaned and greased the stem", "swapped the cooling fan",
           "reset the controller and restored the config", "re-enrolled the badge in the access system",
           "cleared the profile cache", "restarted the transport service", "tensioned and aligned the belt",
           "bled the lines and replaced the relief valve"]
LAY = ["my {e} is acting up again", "the {e} in building {n} is broken", "{e} not working since this morning",
       "problem with our {e}, please help", "urgent: {e} down on line {n}"]


def ticket_text(rng: random.Random, words: int, equipment: str | None = None) -> str:
    """A help-desk ticket about `equipment` (None: any): fault, checks and solution sentences until about `words` words."""
    parts = []
    while sum(len(p.split()) for p in parts) < words:
        e, f, a, n = equipment or rng.choice(EQUIPMENT), rng.choice(FAULTS), rng.choice(ACTIONS), rng.randrange(100, 999)
        parts.append(f"The {e} {f.format(n=n)}. The technician checked the logs, {a.format(n=n)} and verified it "
                     f"with the user at desk {n}; the ticket stayed open one day for monitoring.")
    return " ".join(parts)


def pair_set(n_pairs: int, seed: int = 13) -> tuple[list[str], list[str], torch.Tensor, torch.Tensor]:
    """(query texts, ticket texts, labels 1-5, query index) of n_pairs pairs: six candidates per query, its own ticket
    (YES) and five others (NO)."""
    rng = random.Random(seed)
    equipment = [rng.choice(EQUIPMENT) for _ in range(max(n_pairs // 3, 6))]
    tickets = [ticket_text(rng, 60, e) for e in equipment]
    rows = []
    for q in range(-(-n_pairs // 6)):
        own = rng.randrange(len(tickets))
        query = rng.choice(LAY).format(e=equipment[own], n=rng.randrange(1, 9))
        rows += [(query, tickets[t], 5 if t == own else 1, q) for t in [own, *rng.sample(range(len(tickets)), 5)]]
    queries, candidates, labels, groups = zip(*rows[:n_pairs])
    return list(queries), list(candidates), torch.tensor(labels), torch.tensor(groups)


def f_epoch(folder: str, device: str, params: str, n_pairs: int) -> float:
    """Seconds of one epoch of params' variant F on `device` (training and the dev loss), through ticketsim.training.trainer.fit."""
    siamese = load_params(params).siamese
    variant = siamese.variant("F")
    train = replace(siamese.training(variant, "labels"), epochs=1)
    encoder = siamese.encoder
    model_st = load_encoder(folder, device="cpu").model.float()
    torch.manual_seed(0)
    metric = MetricConfig(dict(variant.channels), dict(variant.levels))
    (query_level, ticket_level), = ((p, t) for p, t, _ in metric.level_pairs())
    branch = TransformerBranch(model_st, encoder.max_tokens, encoder.frozen_layers, 1.0, device, encoder.batch_size)
    model = SiameseLSTM(SiameseConfig(vocab_size=1), learn=metric, branches={"F": branch})
    queries, tickets, labels, groups = pair_set(n_pairs)
    dev = groups % 10 == 0
    rows = torch.arange(len(labels))

    def predict(batch: torch.Tensor) -> torch.Tensor:
        return model({"F": {query_level: [queries[i] for i in batch]}}, {"F": {ticket_level: [tickets[i] for i in batch]}}, metric)

    synchronize(device)
    started = time.perf_counter()
    fit(model, predict, rescale(labels), rows[~dev], rows[dev], train, seed=0, loss=loss_of(variant.loss), groups=groups)
    synchronize(device)
    return time.perf_counter() - started


def encoding(folder: str, device: str, texts: list[str]) -> tuple[np.ndarray, float]:
    """(vectors, passages/s) of channel S's encode_passages on `device`."""
    encoder = load_encoder(folder, device=device)
    encoder.model.float()
    encode_passages(encoder, texts[:64], batch_size=64, progress=False)     # warm-up: CUDA's kernels, the allocator
    synchronize(device)
    started = time.perf_counter()
    with torch.inference_mode():
        vectors = encode_passages(encoder, texts, batch_size=256 if device != "cpu" else 32, progress=False)
    synchronize(device)
    return vectors, len(texts) / (time.perf_counter() - started)


def synchronize(device: str) -> None:
    if device != "cpu":
        torch.cuda.synchronize(device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="a sentence-transformers folder (MiniLM, or its float16 copy)")
    parser.add_argument("--pairs", type=int, default=3000)
    parser.add_argument("--passages", type=int, default=20000)
    parser.add_argument("--cpu-passages", type=int, default=2000)
    parser.add_argument("--params", default=str(Path(__file__).resolve().parents[1] / "params.yaml"))
    args = parser.parse_args()
    devices = ["cuda", "cpu"] if torch.cuda.is_available() else ["cpu"]
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, CUDA device: {name}")
    if "cuda" not in devices:
        print("cuda: skipped, torch sees no CUDA device here")
    rng = random.Random(7)
    texts = [ticket_text(rng, 200) for _ in range(args.passages)]
    vectors = {}
    for device in devices:
        seconds = f_epoch(args.model, device, args.params, args.pairs)
        passages = texts if device != "cpu" else texts[:args.cpu_passages]
        vectors[device], rate = encoding(args.model, device, passages)
        print(f"{device}: F epoch of {args.pairs} pairs {seconds:.1f} s; {len(passages)} passages at {rate:.1f} passages/s",
              flush=True)
    if "cuda" in vectors:
        a, b = vectors["cuda"][:args.cpu_passages], vectors["cpu"]
        cosine = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        print(f"cuda vs cpu vectors: largest absolute difference {np.abs(a - b).max():.2e}, lowest cosine {cosine.min():.6f}")


if __name__ == "__main__":
    main()
