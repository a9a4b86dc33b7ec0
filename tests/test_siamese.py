"""The Replicated Siamese LSTM and the one trainer: shared weights, overfitting a tiny set, resuming from a checkpoint."""
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import torch

from ticketsim.channels.cache import ChannelVectors
from ticketsim.config import TrainConfig
from ticketsim.model.inputs import encode_side, vocabulary_index
from ticketsim.model.siamese import SiameseConfig, SiameseLSTM, Texts
from ticketsim.scoring.weights import MetricConfig
from ticketsim.training.trainer import fit, rescale

WORDS = ["pump", "leak", "motor", "hot", "valve", "stuck", "fan", "noise", "plc", "offline"]
METRIC = MetricConfig(channels={"h": 0.7, "E": 0.3}, levels={"sub-sub": 0.5, "desc-sol": 0.5})


def tiny_problem(metric: MetricConfig = METRIC):
    """8 queries x 8 tickets; query i matches ticket i (label 5), ticket i+1 is REL, i+2 is NO."""
    torch.manual_seed(0)  # the model's initial weights
    g = torch.Generator().manual_seed(0)
    pick = lambda i, n: [WORDS[(i + k) % len(WORDS)] for k in range(n)]  # noqa: E731
    tickets = pl.DataFrame({"ticket_id": [f"t{i}" for i in range(8)], "subject": [pick(i, 2) for i in range(8)],
                            "description": [pick(i, 4) for i in range(8)], "solution": [pick(i + 1, 3) for i in range(8)]})
    queries = pl.DataFrame({"query_id": [f"q{i}" for i in range(8)], "subject": [pick(i, 2)[::-1] for i in range(8)],
                            "description": [pick(i, 1) for i in range(8)]})
    vectors = ChannelVectors("E", tuple(queries["query_id"]), tuple(tickets["ticket_id"]),
                             {c: torch.randn(8, 6, generator=g).numpy() for c in ("sub", "desc", "sub+desc")},
                             {c: torch.randn(8, 6, generator=g).numpy() for c in ("sub", "desc", "sol", "sub+desc", "sub+desc+sol")})
    index, (needs_q, needs_t) = vocabulary_index(WORDS), metric.needs()
    q = encode_side(queries, "query_id", needs_q["h"], index, 10, [vectors], "queries")
    t = encode_side(tickets, "ticket_id", needs_t["h"], index, 10, [vectors], "tickets")
    pairs = [(i, (i + d) % 8, label) for i in range(8) for d, label in ((0, 5), (1, 3), (2, 1))]
    qrows, trows, labels = (torch.tensor(x) for x in zip(*pairs))
    model = SiameseLSTM(SiameseConfig(vocab_size=len(WORDS) + 1, word_dim=8, char_dim=4, hidden=12, dropout=0.0),
                        torch.randn(len(WORDS) + 1, 12, generator=g))
    predict = lambda rows: model(q.take(qrows[rows], needs_q), t.take(trows[rows], needs_t), metric)  # noqa: E731
    return model, predict, rescale(labels), torch.arange(len(pairs))


def test_one_lstm_serves_every_branch():
    model, predict, targets, rows = tiny_problem()
    lstm_params = [name for name, _ in model.named_parameters() if name.startswith("lstm.")]
    assert len(lstm_params) == 4 and not [n for n, _ in model.named_parameters() if "lstm" in n and not n.startswith("lstm.")]
    torch.nn.functional.mse_loss(predict(rows), targets).backward()
    # query and ticket branches both pushed gradients into the one weight set
    assert model.lstm.weight_ih_l0.grad.abs().sum() > 0
    assert model.word.weight.grad is None  # word vectors frozen by default


@pytest.mark.slow
def test_a_tiny_model_overfits_a_tiny_set():
    # h alone: the fixed random E vectors of tiny_problem would keep g away from the targets
    model, predict, targets, rows = tiny_problem(MetricConfig(channels={"h": 1.0}, levels={"sub-sub": 0.5, "desc-sol": 0.5}))
    rows = rows[::3].clone()  # q_i with t_i (YES), t_i+1 (REL) and t_i+2 (NO) for a few i
    rows = torch.cat([rows[:3], rows[:3] + 1, rows[:3] + 2])
    before = torch.nn.functional.mse_loss(predict(rows), targets[rows]).item()
    fit(model, predict, targets, rows, rows, TrainConfig(epochs=200, batch_size=3, patience=200), seed=0)
    model.eval()
    with torch.no_grad():
        after = torch.nn.functional.mse_loss(predict(rows), targets[rows]).item()
    assert after < 0.02 < before


@pytest.mark.slow
def test_resume_from_checkpoint_ends_where_an_uninterrupted_run_ends(tmp_path):
    cfg = TrainConfig(epochs=6, batch_size=5, patience=10)
    model, predict, targets, rows = tiny_problem()
    model.drop.p = 0.3  # dropout draws from the global RNG: resume must restore it
    straight = fit(model, predict, targets, rows[:18], rows[18:], cfg, seed=0)
    expected = {k: v.clone() for k, v in model.state_dict().items()}

    model, predict, targets, rows = tiny_problem()
    model.drop.p = 0.3
    fit(model, predict, targets, rows[:18], rows[18:], TrainConfig(**{**cfg.__dict__, "epochs": 3}), 0, tmp_path / "ckpt.pt",
        meta={"model_config": {"hidden": 12}})
    model, predict, targets, rows = tiny_problem()  # a fresh process: new weights, RNG elsewhere
    model.drop.p = 0.3
    torch.manual_seed(999)
    resumed = fit(model, predict, targets, rows[:18], rows[18:], cfg, 0, tmp_path / "ckpt.pt", meta={"model_config": {"hidden": 12}})
    assert resumed.dev_loss == pytest.approx(straight.dev_loss)
    for name, value in model.state_dict().items():
        assert torch.equal(value, expected[name]), name
    assert torch.load(tmp_path / "ckpt.pt", weights_only=True)["model_config"] == {"hidden": 12}


@pytest.mark.parametrize("pooling", ["mean", "last"])
def test_h_pools_the_lstm_states_of_each_text_and_ignores_padding(pooling):
    torch.manual_seed(0)
    model = SiameseLSTM(SiameseConfig(vocab_size=6, word_dim=3, char_dim=2, hidden=4, dropout=0.0, pooling=pooling)).eval()
    ids = torch.tensor([[1, 2, 3, 0, 0], [4, 5, 0, 0, 0]])
    padded = torch.cat([ids, torch.zeros(2, 4, dtype=torch.long)], dim=1)    # more padding changes nothing
    with torch.no_grad():
        h = model.encode(Texts(ids, torch.tensor([3, 2])))
        assert torch.allclose(h, model.encode(Texts(padded, torch.tensor([3, 2]))), atol=1e-6)
        for row, length in enumerate((3, 2)):     # each text alone, unpadded, through the plain LSTM
            x = torch.cat([model.word(ids[row:row + 1, :length]), model.char(ids[row:row + 1, :length])], dim=-1)
            states, _ = model.lstm(x)
            expected = states[0].mean(0) if pooling == "mean" else states[0, -1]
            assert torch.allclose(h[row], expected, atol=1e-6)


TRAIN_ONCE = """
import sys, torch
sys.path.insert(0, {tests!r})
from test_siamese import tiny_problem
from ticketsim.config import TrainConfig
from ticketsim.training.trainer import fit
model, predict, targets, rows = tiny_problem()
model.drop.p = 0.3
fit(model, predict, targets, rows[:18], rows[18:], TrainConfig(epochs=2, batch_size=6), seed=0)
print(repr(sum(float(p.double().sum()) for p in model.parameters())))
"""


@pytest.mark.slow
def test_training_does_not_depend_on_pythons_string_hashing():
    """Each process hashes strings with its own seed: nothing the trainer iterates over may follow that order."""
    script = TRAIN_ONCE.format(tests=str(Path(__file__).parent))
    runs = {subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONHASHSEED": str(seed)},
                           capture_output=True, text=True, check=True).stdout for seed in (1, 2)}
    assert len(runs) == 1, runs
