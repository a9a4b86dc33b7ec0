"""Tokenization: Punkt sentences (pretrained or trained), NLTK words, normalisation params, vocabulary."""
import polars as pl

from ticketsim.config import TextConfig
from ticketsim.data.tables import PAIR_SCHEMA, Corpus
from ticketsim.text.tokenize import Tokens, make_tokenizer, pretrained_punkt, token_stats, tokenize_corpus, trained_punkt


def corpus(*descriptions: str) -> Corpus:
    tickets = pl.DataFrame({"ticket_id": [f"T{i}" for i in range(len(descriptions))], "subject": ["Pump trips"] * len(descriptions),
                            "description": list(descriptions), "solution": ["Replaced the relay K3. Works now."] * len(descriptions)})
    queries = pl.DataFrame({"query_id": ["Q1"], "subject": ["pump stops"], "description": ["It stops at 3.5 bar."]})
    return Corpus(tickets, queries, pl.DataFrame(schema=PAIR_SCHEMA))


def test_pretrained_punkt_keeps_known_abbreviations_inside_a_sentence():
    sentences = pretrained_punkt().tokenize("Dr. Smith replaced the valve. It works now.")
    assert sentences == ["Dr. Smith replaced the valve.", "It works now."]


def test_trained_punkt_learns_the_corpus_abbreviations():
    words = ["inlet", "outlet", "valve", "motor", "filter", "drive"]
    text = " ".join(f"Pressure is approx. {n} bar at the {words[n % 6]}. The {words[(n + 1) % 6]} runs." for n in range(200))
    assert "approx" not in pretrained_punkt()._params.abbrev_types  # the general English model lacks it
    assert "approx" in trained_punkt([text])._params.abbrev_types


def test_normalisation_follows_the_params():
    data = corpus("Overtemp E4711 at 87.5 °C, 1450 rpm.")
    masked = make_tokenizer(TextConfig(numbers="mask"), data)("Overtemp E4711 at 87.5 °C, 1450 rpm.")
    assert masked == ["overtemp", "e4711", "at", "<num>", "°c", ",", "<num>", "rpm", "."]
    kept = make_tokenizer(TextConfig(numbers="keep", lowercase=False), data)("Overtemp E4711 at 87.5 °C.")
    assert kept == ["Overtemp", "E4711", "at", "87.5", "°C", "."]


def test_tokenize_corpus_gives_tokens_per_component_a_vocabulary_and_round_trips(tmp_path):
    data = corpus("The pump trips. Relay K3 is hot.", "Motor hums.")
    tokens = tokenize_corpus(data, make_tokenizer(TextConfig(), data))
    assert tokens.tickets.columns == ["ticket_id", "subject", "description", "solution"]
    assert tokens.tickets["description"][1].to_list() == ["motor", "hums", "."]
    vocabulary = dict(tokens.vocabulary().iter_rows())
    assert vocabulary["pump"] == 4 and vocabulary["trips"] == 3 and vocabulary["<num>"] == 1
    assert list(tokens.vocabulary()["count"]) == sorted(tokens.vocabulary()["count"], reverse=True)
    tokens.write(tmp_path)
    again = Tokens.read(tmp_path)
    assert again.tickets.equals(tokens.tickets) and again.queries.equals(tokens.queries)
    stats = token_stats(tokens)
    assert stats["mean_tokens"]["queries"]["subject"] == 2.0 and stats["vocabulary"] == tokens.vocabulary().height
