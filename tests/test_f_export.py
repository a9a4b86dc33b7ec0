"""Channel F's tickets through ONNX (issue 33): a bundle whose variant weighs F, with sentence.backend: onnx in its
manifest, encodes tickets (index build, index add) by its fine-tuned encoder's export: the same vectors as torch within
TOLERANCE (int8: cosine above INT8_COSINE), the same top 10; training still runs torch."""
import json

import numpy as np
import pytest
import torch
from benchmarks.common import make_bundle

from ticketsim.bundle.loader import Scorer
from ticketsim.bundle.manifest import BUNDLE_MANIFEST
from ticketsim.channels.onnx_encoder import TOLERANCE  # float32 graph: same computation, other kernels
from ticketsim.search.index import add_tickets, build_index, model_hash
from ticketsim.search.queries import query_encoder
from ticketsim.search.searcher import Searcher

pytest.importorskip("onnxruntime")
INT8_COSINE = 0.9       # dynamic int8 weights of a random 16-wide encoder (MiniLM: 0.98, test_encoder_backends.py)


def with_backend(bundle, folder, backend: str, quantize: str = "none"):
    """A copy of the bundle's manifest pointing its sentence settings at `backend` (the bundle's other files linked)."""
    folder.mkdir()
    for path in bundle.iterdir():
        (folder / path.name).symlink_to(path)
    manifest = json.loads((bundle / BUNDLE_MANIFEST).read_text())
    (folder / BUNDLE_MANIFEST).unlink()
    manifest["sentence"] = {**manifest["sentence"], "backend": backend, "quantize": quantize, "cache": str(folder.parent / "cache")}
    (folder / BUNDLE_MANIFEST).write_text(json.dumps(manifest))
    return folder


@pytest.fixture(scope="module")
def scorers(search_parts, tmp_path_factory):
    """(the F+L bundle (benchmarks.common's FL), its Scorer on each road: torch, onnx, onnx-int8)."""
    root = tmp_path_factory.mktemp("f-export")
    bundle = make_bundle(root / "bundle", search_parts, "FL")
    return bundle, {name: Scorer.load(bundle if name == "torch" else with_backend(bundle, root / name, "onnx", quantize))
                    for name, quantize in (("torch", "none"), ("onnx", "none"), ("onnx-int8", "int8"))}


def test_f_vectors_through_the_export_equal_torch_s(search_parts, scorers):
    tickets = search_parts.corpus.tickets
    texts = [f"{s}\n{d}" for s, d in zip(tickets["subject"], tickets["description"])] + [""]
    vectors = {}
    for name, scorer in scorers[1].items():
        branch = scorer.model.branches["F"]
        assert (branch.exported is None) == (name == "torch") and "exported" not in dict(branch.named_children())
        with torch.no_grad():       # as the scorer encodes (search/encode.py)
            vectors[name] = branch(texts).numpy()
    assert not vectors["onnx"][-1].any()        # an empty text is the zero vector on both roads
    assert np.abs(vectors["onnx"] - vectors["torch"]).max() < TOLERANCE
    cosine = (vectors["onnx-int8"] * vectors["torch"]).sum(1)[:-1] / (
        np.linalg.norm(vectors["onnx-int8"], axis=1) * np.linalg.norm(vectors["torch"], axis=1))[:-1]
    assert cosine.min() > INT8_COSINE


@pytest.mark.slow   # channel S (MiniLM) is encoded too: F starts from it (about a minute under load)
def test_index_build_and_add_through_the_export_give_torch_s_top_10(search_parts, scorers, tmp_path):
    bundle, tickets, queries = scorers[0], search_parts.corpus.tickets, search_parts.corpus.queries.head(5)
    answers, added = {}, {}
    for name in ("torch", "onnx"):
        scorer = scorers[1][name]
        build_index(scorer, model_hash(bundle), tickets.head(60), tmp_path / name)
        _, index = add_tickets(tmp_path / name, scorer, bundle, tickets.slice(60))
        added[name] = np.asarray(index.vectors.take(range(60, len(index))))
        searcher = Searcher(query_encoder(bundle, scorers[1]["torch"]), index, bundle)
        answers[name] = [[h.ticket_id for h in answer.hits] for answer in searcher.search(queries, 10)]
    assert np.abs(added["onnx"] - added["torch"]).max() < 1e-4     # flattened: F's vectors times W and V
    assert answers["onnx"] == answers["torch"]
