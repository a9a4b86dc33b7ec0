"""The cached channels as a registry: dvc.yaml's channels stage iterates CHANNELS (channels.yaml, generated and never
stale), names no channel file by hand, and a new channel is one module plus one line (ticketsim.config.cached.CACHED): a
bag-of-characters channel declared here and registered by that line is weighed by the params, tuned over the range its
line declares, fitted, trained, bundled, indexed and searched with on a tiny corpus."""
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from benchmarks.common import PARAMS_FILES, edit_params, train_parts
from dvc.repo import Repo

from ticketsim.bundle.loader import Scorer
from ticketsim.bundle.writer import final_bundle
from ticketsim.channels.cache import QUERY_COMPONENTS, TICKET_COMPONENTS, ChannelVectors, component_strings
from ticketsim.channels.channel import Channel, Fitted, Fitting, Texts
from ticketsim.channels.registry import CHANNELS, VARS, cache_path, dvc_stage, fit_channel, models_folder
from ticketsim.cli import main
from ticketsim.config import ConfigError, DatasetConfig, Params, SiameseParams, TextConfig, VariantConfig, load_params
from ticketsim.config.cached import CACHED, Cached, channel_names
from ticketsim.evaluate.calibrate import CALIBRATOR, fit_calibrator
from ticketsim.search.index import build_index, model_hash
from ticketsim.search.queries import query_encoder
from ticketsim.search.searcher import Searcher
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus
from ticketsim.training.variant import train_variant, training_inputs_from_files
from ticketsim.workflows.channels import channels_text

REPO = Path(__file__).resolve().parents[1]


def test_channels_yaml_is_the_registry_written_by_ticketsim_channels(capsys):
    assert (REPO / VARS).read_text() == channels_text(), "channels.yaml is stale: run `ticketsim channels --write`"
    assert main(["channels"]) == 0 and capsys.readouterr().out == channels_text()


def test_dvc_yaml_runs_one_stage_per_dataset_and_channel_and_names_no_channel_file():
    text = (REPO / "dvc.yaml").read_text()
    assert not [word for word in ("E.npz", "T.npz", "S.npz", "word2vec.kv", "char_blstm.pt", "docnade") if word in text]
    with Repo(str(REPO)) as repo:
        stages = {stage.addressing: stage for stage in repo.index.stages}
    for name in CHANNELS:
        stage = stages[dvc_stage("default", name)]
        outs = {Path(out.fs_path).relative_to(REPO) for out in stage.outs}
        channels = Path("data/default/channels")
        assert {cache_path(channels, name), models_folder(channels, name)} <= outs
        assert f"--channel {name} " in stage.cmd
    for downstream in ("siamese", "tune", "final", "bundle", "index"):   # every channel's files, through the folder
        assert "data/default/channels" in [Path(dep.fs_path).relative_to(REPO).as_posix() for dep in stages[f"{downstream}@default"].deps]


# ------------------------------------------------------------------ a toy channel: one module's worth (this one), one line below
ALPHABET = "alphabet.json"


def characters(texts: list[str], alphabet: str) -> np.ndarray:
    """Each text's share of each alphabet character (zeros for a text without any)."""
    counts = np.array([[Counter(text.lower())[c] for c in alphabet] for text in texts], dtype=np.float32).reshape(len(texts), len(alphabet))
    return counts / np.maximum(counts.sum(1, keepdims=True), 1)


def bag_vectors(corpus, alphabet: str, parts=(QUERY_COMPONENTS, TICKET_COMPONENTS)) -> ChannelVectors:
    return ChannelVectors("B", tuple(corpus.queries["query_id"]), tuple(corpus.tickets["ticket_id"]),
                          {c: characters(component_strings(corpus.queries, c), alphabet) for c in parts[0]},
                          {c: characters(component_strings(corpus.tickets, c), alphabet) for c in parts[1]})


def fit_bag(fitting: Fitting) -> Fitted:
    alphabet = "".join(sorted({c for text in component_strings(fitting.corpus.tickets, "sub+desc+sol") for c in text.lower()
                               if c.isalnum()}))
    (fitting.models / ALPHABET).write_text(json.dumps(alphabet))
    return Fitted(bag_vectors(fitting.corpus, alphabet), {"alphabet": len(alphabet)}, said=[f"{len(alphabet)} characters"])


ENCODED = []   # the texts the bundle's toy encoder saw


def bag_of(scorer, texts: Texts) -> ChannelVectors:
    ENCODED.append(texts.corpus.tickets.height + texts.corpus.queries.height)
    return bag_vectors(texts.corpus, json.loads((scorer.directory / ALPHABET).read_text()), texts.components)


CHANNEL = Channel("B", "bag", "text", "params-research.yaml", fit_bag, bag_of, bundle={ALPHABET: ALPHABET})


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(CACHED, "B", Cached(__name__, (0.0, 2.0)))     # the one line of ticketsim.config.cached
    return CHANNEL


def test_the_registry_imports_no_channel_module_until_a_channel_is_read():
    code = ("import sys, ticketsim.channels.registry as r; assert 'S' in r.CHANNELS and list(r.CHANNELS) == ['E', 'T', 'S']; "
            "assert not {'torch', 'ticketsim.channels.sumemb', 'ticketsim.channels.pretrained'} & set(sys.modules); "
            "assert r.CHANNELS['T'].name == 'T' and 'ticketsim.channels.topics' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def test_params_weighing_the_toy_channel_are_read_and_tuned_over_its_declared_range(toy, tmp_path, capsys, monkeypatch):
    for name in PARAMS_FILES:
        shutil.copy2(REPO / name, tmp_path / name)
    bag = {"channels": {"B": 1.0, "S": 1.0}, "levels": {"sub+desc-sub+desc": 1.0}}
    path = edit_params(tmp_path, lambda params: params["siamese"]["variants"].update(bag=bag))
    assert list(CHANNELS)[-1] == "B" and CHANNELS["B"] is toy and "B" in channel_names()
    assert main(["params", "--params", str(path)]) == 0 and json.loads(capsys.readouterr().out)["siamese"]["variants"]["bag"]
    params = load_params(path)
    assert "B" not in params.tune.ranges.channels and "S" in params.tune.ranges.channels   # params-research.yaml's S
    assert params.tune.space(params.siamese.variants["bag"]).channels == {"B": (0.0, 2.0), "S": (0.0, 8.0)}
    monkeypatch.delitem(CACHED, "B")          # unregistered: the same params are refused
    with pytest.raises(ConfigError, match="siamese.variants.bag.channels.B: no channel of that name"):
        load_params(path)


def test_a_toy_channel_is_fitted_trained_bundled_and_searched_with(toy, tmp_path):
    parts = train_parts(tmp_path / "parts", n_tickets=60, n_enduser=4)   # channels E and T fitted briefly: the word table
    corpus = parts.corpus
    tokens = tokenize_corpus(corpus, make_tokenizer(TextConfig(), corpus), progress=False)
    corpus.write(tmp_path / "prepared")
    tokens.write(tmp_path / "tokens")
    variant = VariantConfig({"B": 1.0}, {"sub+desc-sub+desc": 1.0}, learn=True, train={"epochs": 3})   # W_B, V learnt
    params = Params(0, {"default": DatasetConfig("default", "synthetic")},
                    siamese=SiameseParams(variants={"bag": variant}, final="bag", unlabelled="bag"))
    fitted = fit_channel("B", params, "default", corpus, tokens, parts.channels)
    assert fitted.metrics["alphabet"] > 20 and (models_folder(parts.channels, "B") / ALPHABET).is_file()

    data = training_inputs_from_files(params, str(tmp_path / "prepared"), str(tmp_path / "tokens"), parts.channels, [variant])
    assert [v.channel for v in data.channels] == ["B"] and data.scales["B"] > 0
    trained = train_variant(data, variant, params.seed)
    model = tmp_path / "final"
    model.mkdir()
    trained.save(model)
    labels, scores = corpus.pairs["label"].to_numpy(), trained.pair_scores()
    fit_calibrator(scores, labels).save(model / CALIBRATOR)
    bundle = final_bundle(tmp_path / "bundle", params, model, parts.channels)
    assert (bundle / ALPHABET).read_text() == (models_folder(parts.channels, "B") / ALPHABET).read_text()

    scorer = Scorer.load(bundle)
    index = build_index(scorer, model_hash(bundle), corpus.tickets, tmp_path / "index")
    assert index.vectors.d == fitted.metrics["alphabet"] and ENCODED   # B's one level, through the toy's encoder
    ticket = corpus.tickets.row(7, named=True)
    query = pl.DataFrame({"query_id": ["q"], "subject": [ticket["subject"]], "description": [ticket["description"]]})
    encoded = len(ENCODED)
    [answer] = Searcher(query_encoder(bundle, scorer), index, bundle).search(query, k=3)
    assert len(ENCODED) > encoded                        # the query too
    top = answer.hits[0]
    assert (top.subject, top.description) == (ticket["subject"], ticket["description"]) and top.score == pytest.approx(1.0)
