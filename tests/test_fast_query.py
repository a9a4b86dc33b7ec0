"""A query without torch (issue 20): the bundle's sentence encoder exported to ONNX gives channel S's vectors of the
torch path, the export's query vectors, top k and reasons equal the Scorer's, a one-query `ticketsim search`
of such a bundle imports neither torch, sentence-transformers, NLTK's package, scikit-learn nor gensim (issue 32: a
fine-tuned encoder's bundle too, F's and Fq's export reading the first max_tokens word pieces), and a bundle that needs
torch has no export and searches as before."""
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch
from benchmarks.common import ENCODER_CONFIG, SCALES, make_bundle, tiny_encoder

from ticketsim.bundle.loader import Scorer
from ticketsim.channels import sentence as channel_s
from ticketsim.channels.onnx_encoder import TOLERANCE, OnnxEncoder, export_encoder, kept_export
from ticketsim.channels.sentence import encode_texts, load_encoder
from ticketsim.config import SentenceConfig
from ticketsim.search.index import build_index, model_hash
from ticketsim.search.queries import QUERY, ExportedQueries, ScorerQueries, export_folder, export_queries, query_encoder
from ticketsim.search.searcher import Searcher

SRC = Path(__file__).resolve().parents[1] / "src"
HEAVY = ("torch", "sentence_transformers", "transformers", "nltk", "sklearn", "gensim", "pandas")


@pytest.mark.parametrize("pooling", ["first", "mean"])
def test_an_exported_encoder_gives_the_torch_paths_vectors(search_parts, tmp_path, pooling):
    texts = [t for frame in (search_parts.corpus.tickets, search_parts.corpus.queries) for t in frame["description"]]
    encoder = load_encoder(str(tiny_encoder(tmp_path / "tiny", texts)), max_tokens=16)
    cfg = SentenceConfig(max_tokens=16, overlap=2, pooling=pooling)
    assert export_encoder(encoder, cfg, tmp_path / "onnx") is None
    sample = [*texts[:40], "", "  ", texts[0]]      # long descriptions read in several passages, empty texts, a repeat
    expected = encode_texts(encoder, sample, cfg.pooling, cfg.overlap, cfg.normalize)
    exported = OnnxEncoder.load(tmp_path / "onnx").encode(sample)
    assert np.abs(exported - expected).max() < 1e-6
    assert not exported[-2].any() and not exported[-3].any()


def test_an_export_is_kept_in_the_cache_and_copied_for_the_next_bundle_of_the_same_encoder_and_settings(search_parts,
                                                                                                        tmp_path, monkeypatch):
    texts = [t for frame in (search_parts.corpus.tickets, search_parts.corpus.queries) for t in frame["description"]]
    cfg = SentenceConfig(model=str(tiny_encoder(tmp_path / "tiny", texts)), max_tokens=16, overlap=2, cache=str(tmp_path / "cache"))
    loaded, load = [], channel_s.configured_encoder
    monkeypatch.setattr(channel_s, "configured_encoder", lambda c: loaded.append(c) or load(c))
    assert kept_export(cfg, tmp_path / "first") is None and len(loaded) == 1
    assert kept_export(cfg, tmp_path / "second") is None and len(loaded) == 1      # copied: no encoder loaded
    files = sorted(p.relative_to(tmp_path / "first") for p in (tmp_path / "first").rglob("*") if p.is_file())
    assert files and all((tmp_path / "first" / f).read_bytes() == (tmp_path / "second" / f).read_bytes() for f in files)
    assert kept_export(replace(cfg, overlap=3), tmp_path / "third") is None and len(loaded) == 2   # other settings
    assert json.loads((tmp_path / "third" / "encoder.json").read_text())["overlap"] == 3


@pytest.fixture(scope="module")
def exported(search_parts, tmp_path_factory):
    """(bundle, index folder, the searcher through torch, the one through the export) of the registered configuration, Ac+L-relpos."""
    root = tmp_path_factory.mktemp("fast")
    bundle = make_bundle(root / "bundle", search_parts, "AL")
    assert export_queries(bundle) is None and (bundle / QUERY).is_dir()
    scorer = Scorer.load(bundle)
    index = build_index(scorer, model_hash(bundle), search_parts.corpus.tickets, root / "index")
    return bundle, root / "index", Searcher(ScorerQueries(scorer), index, bundle), Searcher(ExportedQueries(bundle), index, bundle)


@pytest.mark.slow
def test_the_export_answers_as_torch_does(exported, search_parts):
    bundle, _, through_torch, fast = exported
    assert isinstance(query_encoder(bundle), ExportedQueries)
    answers_alike(fast, through_torch, search_parts.corpus.queries)


def answers_alike(fast: Searcher, through_torch: Searcher, queries: pl.DataFrame) -> None:
    """The two runtimes give the queries the same tokens, vectors (within the export's tolerance), top 10 and reasons."""
    score = fast.index.score
    (tokens, vectors), (expected_tokens, expected) = fast.queries.encode(queries, score), through_torch.queries.encode(queries, score)
    assert tokens.equals(expected_tokens)
    # float32 sums in another order: within what the export is checked to, the CPU's kernels decide how close
    assert np.abs(vectors - expected).max() < TOLERANCE * np.abs(expected).max()
    for a, b in zip(fast.search(queries, 10), through_torch.search(queries, 10)):
        assert [h.ticket_id for h in a.hits] == [h.ticket_id for h in b.hits], a.query_id
        assert np.allclose([h.score for h in a.hits], [h.score for h in b.hits], rtol=1e-5)
        assert [h.reasons for h in a.hits] == [h.reasons for h in b.hits]


def cold_search(bundle: Path, index: Path) -> tuple[list, list[str], str]:
    """One `ticketsim search` in a new process: (its JSON answer, the heavy modules it imported, what it said on stderr)."""
    script = ("import json, sys\nfrom ticketsim.cli import main\ncode = main(sys.argv[1:])\n"
              f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))\nsys.exit(code)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script, "search", "--model", str(bundle), "--index", str(index), "--subject",
                           "pump getting hot", "--description", "feed pump at 95 C since monday, bearing noise", "-k", "3",
                           "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    answer, imported, _ = done.stdout.rsplit("\n", 2)
    return json.loads(answer), json.loads(imported), done.stderr


@pytest.mark.slow
def test_a_cold_search_of_an_exported_bundle_imports_no_torch(exported):
    bundle, index, through_torch, _ = exported
    answer, imported, said = cold_search(bundle, index)
    assert imported == [] and "no query export" not in said
    query = pl.DataFrame({"query_id": ["1"], "subject": ["pump getting hot"],
                          "description": ["feed pump at 95 C since monday, bearing noise"]})
    assert [h["ticket_id"] for h in answer[0]["hits"]] == [h.ticket_id for h in through_torch.search(query, 3)[0].hits]


@pytest.mark.slow
@pytest.mark.parametrize("variant, channel", [("FA", "F"), ("FqL", "Fq")])
def test_a_fine_tuned_encoder_is_exported_and_its_bundle_searches_without_torch(search_parts, tmp_path, variant, channel):
    bundle = make_bundle(tmp_path / "bundle", search_parts, variant)
    assert export_queries(bundle) is None
    # F's bundle reads S too (A is S's adapter); Fq's ticket side is S, which a query does not read
    assert sorted(p.name for p in (bundle / QUERY).iterdir() if p.is_dir()) == {"F": ["encoder", "encoder-F"],
                                                                                "Fq": ["encoder-Fq"]}[channel]
    scorer = Scorer.load(bundle)
    branch = scorer.model.branches[channel]
    tower = branch.query if channel == "Fq" else branch
    tickets = search_parts.corpus.tickets
    texts = [f"{s}\n{d}" for s, d in zip(tickets["subject"], tickets["description"])] + [""]
    assert max(len(tower.model.tokenize([t])["input_ids"][0]) for t in texts) == ENCODER_CONFIG.max_tokens   # some are cut
    with torch.no_grad():
        expected = tower(texts).numpy() * SCALES["S"]
    assert np.abs(OnnxEncoder.load(bundle / QUERY / export_folder(channel)).encode(texts) - expected).max() < TOLERANCE
    index = build_index(scorer, model_hash(bundle), tickets, tmp_path / "index")
    answers_alike(Searcher(ExportedQueries(bundle), index, bundle), Searcher(ScorerQueries(scorer), index, bundle),
                  search_parts.corpus.queries)
    answer, imported, said = cold_search(bundle, tmp_path / "index")
    assert imported == [] and "no query export" not in said and len(answer[0]["hits"]) == 3


@pytest.mark.slow
def test_a_bundle_that_needs_torch_gets_no_export_and_searches_through_the_scorer(search_parts, tmp_path):
    bundle = make_bundle(tmp_path / "bundle", search_parts, "22")     # h, E and T: the LSTM, word2vec and DocNADE
    assert export_queries(bundle) == "its variant weighs E, T, h, which a query computes with torch"
    assert not (bundle / QUERY).exists()
    build_index(Scorer.load(bundle), model_hash(bundle), search_parts.corpus.tickets, out=tmp_path / "index")
    answer, imported, said = cold_search(bundle, tmp_path / "index")
    assert "torch" in imported and len(answer[0]["hits"]) == 3
    assert "has no query export" in said and "encoded through torch" in said
    assert Searcher.load(bundle, tmp_path / "index").queries.runtime == "torch"
