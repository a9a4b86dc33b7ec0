"""Day one on a help desk's own export, of any size: every ready-made mapping's export shapes (tests/export_shapes.py) of
1, 5 and 300 tickets are read as a tickets-only dataset and tokenized to plain words; the channels train on a knowledge
base of one ticket and of five, shrinking what such a base cannot feed and saying so; `ticketsim validate --csv` checks a
tickets-only folder. The docs' two day-one commands run as written on a 1-ticket export in
tests/test_tickets_only.py; reports/studies/dayone_exports.md ran them on every shape at every size.
"""
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from export_shapes import SHAPES, write_export

from ticketsim.channels import topics as channel_t
from ticketsim.channels.char_blstm import train_char_blstm
from ticketsim.channels.projection import pca_2d
from ticketsim.channels.sumemb import sumemb_vectors
from ticketsim.channels.word2vec import corpus_sentences, train_word2vec
from ticketsim.cli import BAD_INPUT, ERROR, OK, main
from ticketsim.config import DatasetConfig, EmbeddingConfig, TextConfig, TopicsConfig
from ticketsim.data.sources import read_dataset
from ticketsim.data.validate import IntakeReport
from ticketsim.text.tokenize import Tokens, make_tokenizer, tokenize_corpus

SIZES = (1, 5, pytest.param(300, marks=pytest.mark.slow))
# What HTML leaves in the tokens when it is not reduced: tag names split off their brackets, entities' names
MARKUP_TOKENS = {"p", "/p", "br", "br/", "div", "/div", "li", "ul", "deg", "nbsp", "lt", "gt", "quot"}


def tokens_of(folder: Path, shape: str) -> Tokens:
    """The export in `folder` as prepare reads and tokenizes a tickets-only dataset of it (labels: false)."""
    dataset = DatasetConfig(name="mydesk", source="csv", raw=str(folder), columns=SHAPES[shape][0], labels=False)
    corpus = read_dataset(dataset, IntakeReport())
    return tokenize_corpus(corpus, make_tokenizer(TextConfig(), corpus))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_export_shape_of_any_size_is_read_as_tickets_and_tokenized_to_plain_words(tmp_path, shape, size):
    write_export(tmp_path, shape, size)
    tokens = tokens_of(tmp_path, shape)
    assert (tokens.tickets.height, tokens.queries.height) == (size, 0)
    markup = [word for word in tokens.vocabulary()["token"]
              if word in MARKUP_TOKENS or re.search(r"[<>]", word) and word != "<num>" or re.search(r"&\w", word)]
    assert not markup, f"HTML reached the tokens of {shape}: {markup[:10]}"


@pytest.mark.parametrize("size", [1, 5])
def test_the_channels_train_on_a_knowledge_base_of_one_or_five_tickets_and_say_what_they_shrank(tmp_path, size):
    write_export(tmp_path, "jira-html", size)
    tokens = tokens_of(tmp_path, "jira-html")
    # the defaults where they decide what a small base lacks (min_documents, heldout), few epochs to stay quick
    embedding = EmbeddingConfig()
    embedding = replace(embedding, word2vec=replace(embedding.word2vec, epochs=2),
                        char_blstm=replace(embedding.char_blstm, epochs=2))
    word2vec, _ = train_word2vec(corpus_sentences(tokens), embedding.word2vec, 13)
    chars, _ = train_char_blstm(word2vec.index_to_key, word2vec.vectors, embedding.char_blstm, 13, progress=False)
    vectors, _ = sumemb_vectors(tokens, word2vec, chars)
    assert pca_2d(vectors.tickets["sub+desc+sol"]).shape == (size, 2)      # the stages' projection plot

    topics = TopicsConfig()
    topics = replace(topics, workers=1, docnade=replace(topics.docnade, epochs=2), lda=replace(topics.lda, passes=1, particles=2))
    models = channel_t.fit_topic_models(tokens, topics, 13)
    training = size - channel_t.heldout_count(size, topics.heldout)
    assert training < topics.vocabulary.min_documents
    assert all(model.vocabulary.words for model in models.values())
    assert channel_t.said_of(models) == [f"M1 and M2: no word is in topics.vocabulary.min_documents (10) of the {training} training "
                               "tickets, so the vocabulary keeps every word",
                               *(["M1 and M2: no ticket held out of 1, so no held-out perplexity"] if size == 1 else [])]
    assert channel_t.topic_vectors(tokens, models).tickets["sub+desc+sol"].shape == (size, topics.n_topics)
    table = {name: model.perplexity for name, model in models.items()}
    assert "| SUB |" in channel_t.perplexity_markdown(table, models, "mydesk", channel_t.heldout_count(size, topics.heldout))
    assert "## M2" in channel_t.topic_words_markdown(models, topics.top_words, "mydesk", channel_t.coherence_table(tokens, models, 10), 0.1)
    assert all(np.isfinite(v) for m in table.values() for kind in ("docnade", "lda") for v in m[kind].values()
               if v is not None)


def test_word2vec_learns_every_word_of_a_ticket_whose_words_each_occur_once(tmp_path):
    (tmp_path / "tickets.csv").write_text("number,short_description,description,close_notes\n"
                                          "INC0000001,Printer broken,Jams,Replaced roller\n")
    tokens = tokens_of(tmp_path, "servicenow-no-work-notes")
    cfg = EmbeddingConfig().word2vec
    word2vec, report = train_word2vec(corpus_sentences(tokens), replace(cfg, epochs=2), 13)
    assert (report.min_count, cfg.min_count) == (1, 2)          # the stage says so when min_count was lowered
    assert sorted(word2vec.index_to_key) == sorted(w for field in ("subject", "description", "solution")
                                                   for w in tokens.tickets[field][0])


def test_validate_checks_a_tickets_only_folder_and_says_how_when_it_is_not_told(tmp_path, capsys):
    write_export(tmp_path, "servicenow-no-work-notes", 5)
    assert main(["validate", "--csv", str(tmp_path), "--columns", "servicenow", "--tickets-only"]) == OK
    assert '"tickets": 5' in capsys.readouterr().out
    assert main(["validate", "--csv", str(tmp_path), "--columns", "servicenow"]) == BAD_INPUT
    assert f"{tmp_path} holds tickets and no queries or pairs: add --tickets-only" in capsys.readouterr().err
    assert main(["validate", "default", "--tickets-only"]) == ERROR        # a dataset says labels: false in params
    assert "--tickets-only checks a --csv folder" in capsys.readouterr().err
