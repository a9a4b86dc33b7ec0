"""Channel E on small data: reproducible vectors, unseen and misspelt words, SumEMB sums, the cache, pretrained vectors."""
import numpy as np
import polars as pl
import pytest
import torch
from gensim.models import KeyedVectors

from ticketsim.channels.cache import ChannelVectors
from ticketsim.channels.char_blstm import encode, load_checkpoint, save_checkpoint, train_char_blstm
from ticketsim.channels.sumemb import sumemb_vectors, word_vectors
from ticketsim.channels.word2vec import corpus_sentences, load_pretrained, load_vectors, save_vectors, train_word2vec
from ticketsim.config import CharBLSTMConfig, Word2VecConfig
from ticketsim.text.tokenize import Tokens

SEED = 13
W2V = Word2VecConfig(dim=16, window=3, min_count=1, epochs=5)
CHARS = CharBLSTMConfig(epochs=3, heldout=0.2)
TECHNICAL = ("compressor transformer converter inverter actuator thermostat bearing gearbox coupling impeller "
             "condenser evaporator breaker contactor capacitor resistor encoder sensor transmitter controller "
             "valve flange gasket manifold turbine generator alternator rectifier heater chiller").split()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def make_tokens(tickets: list[tuple[str, str, str]], queries: list[tuple[str, str]]) -> Tokens:
    """Tokens from whitespace-split texts: (subject, description, solution) per ticket, (subject, description) per query."""
    def frame(rows, prefix, fields):
        schema = {f"{prefix}_id": pl.String, **{f: pl.List(pl.String) for f in fields}}
        return pl.DataFrame([{f"{prefix}_id": f"{prefix[0].upper()}{i}", **{f: text.split() for f, text in zip(fields, row)}}
                             for i, row in enumerate(rows)], schema=schema)
    return Tokens(frame(tickets, "ticket", ("subject", "description", "solution")), frame(queries, "query", ("subject", "description")))


@pytest.fixture(scope="module")
def tokens() -> Tokens:
    rng = np.random.default_rng(0)
    tickets = [(f"{a} fault", f"the {a} near the {b} shows a fault code e{100 + i}", f"replaced the {b} and tested the {a}")
               for i, (a, b) in enumerate(zip(rng.choice(TECHNICAL, 60), rng.choice(TECHNICAL, 60)))]
    tickets.append(("", "blank subject", ""))  # empty components must give zero vectors
    queries = [(f"{a} broken", f"our {a} stopped") for a in rng.choice(TECHNICAL, 12)]
    return make_tokens(tickets, queries)


@pytest.fixture(scope="module")
def word2vec(tokens) -> KeyedVectors:
    return train_word2vec(corpus_sentences(tokens), W2V, SEED)[0]


@pytest.fixture(scope="module")
def chars(word2vec):
    return train_char_blstm(word2vec.index_to_key, word2vec.vectors, CHARS, SEED, progress=False)[0]


def test_same_seed_gives_identical_word2vec_vectors_and_the_kv_file_round_trips(tokens, word2vec, tmp_path):
    again, report = train_word2vec(corpus_sentences(tokens), W2V, SEED)
    assert again.index_to_key == word2vec.index_to_key and np.array_equal(again.vectors, word2vec.vectors)
    assert report.trained == report.vocabulary == len(again) and report.pretrained == 0
    save_vectors(again, tmp_path / "word2vec.kv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["word2vec.kv"]  # one file for DVC, no side arrays
    save_vectors(word2vec, tmp_path / "first" / "word2vec.kv")
    assert (tmp_path / "word2vec.kv").read_bytes() == (tmp_path / "first" / "word2vec.kv").read_bytes()
    loaded = load_vectors(tmp_path / "word2vec.kv")
    assert loaded.index_to_key == again.index_to_key and np.array_equal(loaded.vectors, again.vectors)


def test_same_seed_gives_identical_char_vectors_and_the_checkpoint_round_trips(word2vec, chars, tmp_path):
    again, report = train_char_blstm(word2vec.index_to_key, word2vec.vectors, CHARS, SEED, progress=False)
    words = [*word2vec.index_to_key, "compresor", "x9-unknown"]
    assert np.array_equal(encode(again, words), encode(chars, words))
    assert encode(again, words).shape == (len(words), 50)
    assert report.words + report.heldout_words == len(word2vec) and len(report.epoch_loss) == CHARS.epochs
    save_checkpoint(again, tmp_path / "char_blstm.pt")
    save_checkpoint(chars, tmp_path / "first" / "char_blstm.pt")
    assert (tmp_path / "char_blstm.pt").read_bytes() == (tmp_path / "first" / "char_blstm.pt").read_bytes()
    torch.load(tmp_path / "char_blstm.pt", weights_only=True)  # plain dicts and tensors only: no pickled modules
    assert np.array_equal(encode(load_checkpoint(tmp_path / "char_blstm.pt"), words), encode(again, words))


def test_a_misspelt_technical_word_gets_a_char_vector_close_to_its_correct_spelling():
    # Targets of arbitrary direction per word: the spelling, not the meaning, must carry the misspelling home.
    targets = np.random.default_rng(1).normal(size=(len(TECHNICAL), 32)).astype(np.float32)
    cfg = CharBLSTMConfig(epochs=40, lr=0.01, batch_size=8, heldout=0.0)
    model = train_char_blstm(TECHNICAL, targets, cfg, SEED, progress=False)[0]
    known = encode(model, TECHNICAL)
    for typo, correct in (("compresor", "compressor"), ("transfromer", "transformer"), ("thermostatt", "thermostat"),
                          ("impellr", "impeller")):
        typo_vector = encode(model, [typo])[0]
        similarities = {word: cosine(typo_vector, vector) for word, vector in zip(TECHNICAL, known)}
        assert max(similarities, key=similarities.get) == correct, (typo, sorted(similarities.items(), key=lambda kv: -kv[1])[:3])


def test_an_unknown_word_gets_a_zero_word2vec_part_and_a_nonzero_char_part(word2vec, chars):
    vectors = word_vectors(["compressor", "zq-4711x"], word2vec, chars)
    assert vectors.shape == (2, 16 + 50)
    assert np.array_equal(vectors[0, :16], word2vec["compressor"])
    assert not vectors[1, :16].any() and np.abs(vectors[1, 16:]).sum() > 0
    assert np.array_equal(vectors[:, 16:], encode(chars, ["compressor", "zq-4711x"]))


def test_e_of_a_merged_component_is_the_sum_of_its_parts_and_the_cache_round_trips(tokens, word2vec, chars, tmp_path):
    vectors, report = sumemb_vectors(tokens, word2vec, chars)
    assert vectors.channel == "E" and vectors.dim == 16 + 50 == report.dim
    t, q = vectors.tickets, vectors.queries
    np.testing.assert_allclose(t["sub+desc+sol"], t["sub"] + t["desc"] + t["sol"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t["sub+desc"], t["sub"] + t["desc"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(q["sub+desc"], q["sub"] + q["desc"], rtol=1e-5, atol=1e-5)
    words = tokens.tickets["description"][0].to_list()
    np.testing.assert_allclose(t["desc"][0], word_vectors(words, word2vec, chars).sum(0), rtol=1e-5, atol=1e-5)
    assert not t["sub"][-1].any() and not t["sol"][-1].any()  # the ticket with empty subject and solution

    vectors.save(tmp_path / "E.npz")
    loaded = ChannelVectors.load(tmp_path / "E.npz")
    assert (loaded.channel, loaded.query_ids, loaded.ticket_ids) == ("E", vectors.query_ids, vectors.ticket_ids)
    for side, original in ((loaded.queries, q), (loaded.tickets, t)):
        assert side.keys() == original.keys() and all(np.array_equal(side[c], original[c]) for c in original)


def test_the_same_seed_and_inputs_give_an_identical_e_cache(tokens, word2vec, chars, tmp_path):
    again_word2vec = train_word2vec(corpus_sentences(tokens), W2V, SEED)[0]
    again_chars = train_char_blstm(again_word2vec.index_to_key, again_word2vec.vectors, CHARS, SEED, progress=False)[0]
    first, second = sumemb_vectors(tokens, word2vec, chars)[0], sumemb_vectors(tokens, again_word2vec, again_chars)[0]
    for component in first.tickets:
        assert np.array_equal(first.tickets[component], second.tickets[component])
    for component in first.queries:
        assert np.array_equal(first.queries[component], second.queries[component])
    first.save(tmp_path / "a" / "E.npz")
    second.save(tmp_path / "b" / "E.npz")
    assert (tmp_path / "a" / "E.npz").read_bytes() == (tmp_path / "b" / "E.npz").read_bytes()  # DVC sees no change


@pytest.mark.parametrize("name, binary", [("tiny.txt", False), ("tiny.bin", True)])
def test_pretrained_vectors_are_used_for_their_words_and_corpus_training_fills_the_rest(tokens, tmp_path, name, binary):
    rng = np.random.default_rng(2)
    file_words = ["compressor", "valve", "blank", "unrelated-word"]  # "blank" occurs once: below min_count 2
    file_vectors = KeyedVectors(vector_size=16)
    file_vectors.add_vectors(file_words, rng.normal(size=(4, 16)).astype(np.float32))
    file_vectors.save_word2vec_format(str(tmp_path / name), binary=binary)
    pretrained = load_pretrained(tmp_path / name)
    cfg = Word2VecConfig(dim=16, window=3, min_count=2, epochs=5, pretrained=str(tmp_path / name))

    vectors, report = train_word2vec(corpus_sentences(tokens), cfg, SEED, pretrained)
    for word in ("compressor", "valve", "blank"):
        assert np.array_equal(vectors[word], file_vectors[word])  # locked during training: exactly the file's vectors
    assert "unrelated-word" not in vectors  # only the corpus vocabulary is kept
    alone = train_word2vec(corpus_sentences(tokens), cfg, SEED)[0]
    assert set(vectors.key_to_index) == set(alone.key_to_index) | {"blank"}
    assert report.pretrained == 3 and report.trained == len(vectors) - 3
    assert np.abs(vectors["gearbox"]).sum() > 0 and not np.array_equal(vectors["gearbox"], alone["gearbox"])

    with pytest.raises(ValueError, match="set dim to 16"):
        train_word2vec(corpus_sentences(tokens), Word2VecConfig(dim=8), SEED, pretrained)
    with pytest.raises(FileNotFoundError, match="embedding.word2vec.pretrained"):
        load_pretrained(tmp_path / "missing.txt")
