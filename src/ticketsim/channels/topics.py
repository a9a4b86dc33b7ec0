"""Channel T end to end: held-out split, DocNADE M1/M2 and LDA, the perplexity table, T vectors, the topic words with their
NPMI coherence on the tickets (the report, and which topics a search may name).

As in the paper, M1 learns from the tickets' SUB+DESC and M2 from SUB+DESC+SOL. Which model gives which component's T is
`topics.space`. The metric takes ||T_p - T_q||_1 between a query and a ticket component, which means something only when
both vectors come from the same model: two models' hidden units are unrelated (unit j of M1 is no unit of M2). So the
default, 'm2', represents every component with M2, the one model that has read every ticket field (and so every word a
query may share with a ticket); 'm1' uses M1 throughout. 'paper' is the paper's split, M1 for the query components and the
ticket SUB, DESC, SUB+DESC, M2 for SOL and SUB+DESC+SOL: its cross-model pairs (Table 5 row 9, SUB+DESC - SUB+DESC+SOL)
then score at chance level (retrieve Acc@10 0% on the default data, 2% on SemEval dev).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ticketsim.channels.cache import COMPONENTS, ChannelVectors, component_texts
from ticketsim.channels.channel import Channel, Fitted, Fitting, Texts
from ticketsim.channels.coherence import COHERENCE_WORDS, npmi_coherence
from ticketsim.channels.docnade import (
    DocNADE,
    DocNADEConfig,
    Vocabulary,
    build_vocabulary,
    document_nll,
    document_perplexity,
    load_checkpoint,
    represent,
    save_checkpoint,
    top_words,
    train,
)
from ticketsim.channels.lda import LDATopics, left_to_right_nll, train_lda, variational_nll
from ticketsim.config import TopicsConfig
from ticketsim.side_by_side import side_by_side
from ticketsim.text.tokenize import Tokens

MODELS = {"m1": "sub+desc", "m2": "sub+desc+sol"}  # model -> the ticket text it learns from
REASON_MODEL = "m2"   # the model whose topics a search names: M2 read SUB+DESC+SOL, every word a query may share with a ticket
PAPER_MODEL_OF = {"sub": "m1", "desc": "m1", "sub+desc": "m1", "sol": "m2", "sub+desc+sol": "m2"}


def model_of(component: str, space: str) -> str:
    """The model whose T represents `component` under `topics.space` (see the module docstring)."""
    return PAPER_MODEL_OF[component] if space == "paper" else space


@dataclass(frozen=True, eq=False)
class TopicModel:
    """One of M1, M2: its vocabulary, DocNADE, the LDA trained on the same documents and, once trained, its row of the
    perplexity table (held-out tickets)."""

    name: str
    vocabulary: Vocabulary
    docnade: DocNADE
    history: list[dict]
    lda: LDATopics
    seconds: dict[str, float]
    perplexity: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()     # what a small knowledge base made it shrink or skip (said by said_of)

    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        save_checkpoint(directory / f"{self.name}.pt", self.docnade, self.vocabulary, self.history)
        np.savez(directory / f"lda_{self.name}.npz", topic_word=self.lda.topic_word, alpha=self.lda.alpha)

    @classmethod
    def load(cls, directory: str | Path, name: str) -> TopicModel:
        directory = Path(directory)
        docnade, vocabulary = load_checkpoint(directory / f"{name}.pt")
        with np.load(directory / f"lda_{name}.npz") as lda:
            topics = LDATopics(lda["topic_word"], lda["alpha"])
        return cls(name, vocabulary, docnade, [], topics, {})


def heldout_count(n_tickets: int, heldout: int) -> int:
    """How many tickets the perplexity table holds out: `heldout`, at most half of them (none of a single ticket)."""
    return min(heldout, n_tickets // 2)


def heldout_mask(n_tickets: int, heldout: int, seed: int) -> np.ndarray:
    """A seeded random choice of heldout_count tickets, True where held out."""
    mask = np.zeros(n_tickets, dtype=bool)
    mask[np.random.default_rng(seed).choice(n_tickets, size=heldout_count(n_tickets, heldout), replace=False)] = True
    return mask


# Fewer tickets than this: M1 and M2 fit in this process, one after the other. A spawned worker spends about 8 s of a
# core importing torch and gensim; DocNADE and LDA took 15 s (M1) and 26 s (M2) for 1,000 tickets on one core, and a
# day-one base of a few tickets fits in a second.
SIDE_BY_SIDE_TICKETS = 500


def fit_topic_models(tokens: Tokens, cfg: TopicsConfig, seed: int) -> dict[str, TopicModel]:
    """M1 and M2 (fit_topic_model), side by side on cfg.workers processes from SIDE_BY_SIDE_TICKETS tickets: each is
    seeded alone, so the same models either way."""
    workers = cfg.workers if tokens.tickets.height >= SIDE_BY_SIDE_TICKETS else 1
    fitted = dict(side_by_side(fit_topic_model, (tokens, cfg, seed), list(MODELS), workers, cfg.docnade.threads))
    return {name: fitted[name] for name in MODELS}


def fit_topic_model(shared: tuple[Tokens, TopicsConfig, int], name: str) -> TopicModel:
    """Model `name` of MODELS: DocNADE and LDA on its text of the training tickets (the held-out tickets excluded), with
    its perplexity row measured in the same job (it costs as much as the LDA: side by side too)."""
    tokens, cfg, seed = shared
    _, tickets = component_texts(tokens)
    training = ~heldout_mask(tokens.tickets.height, cfg.heldout, seed)
    documents = [doc for doc, keep in zip(tickets[MODELS[name]], training) if keep]
    vocabulary, notes = build_vocabulary(documents, cfg.vocabulary), []
    if not vocabulary.words:    # a small knowledge base: no word is in min_documents of its few tickets
        vocabulary = build_vocabulary(documents, replace(cfg.vocabulary, min_documents=1))
        notes.append(f"no word is in topics.vocabulary.min_documents ({cfg.vocabulary.min_documents}) of the "
                     f"{len(documents)} training tickets, so the vocabulary keeps every word")
    if not vocabulary.words:
        raise ValueError(f"topics: the tickets' {MODELS[name].upper()} hold no word a topic model can learn from (only "
                         "numbers, punctuation or stopwords)")
    encoded = [vocabulary.encode(doc) for doc in documents]
    start = time.perf_counter()
    docnade, history = train(encoded, DocNADEConfig(len(vocabulary.words), cfg.n_topics, cfg.docnade.activation), cfg.docnade,
                             seed, desc=f"docnade {name}")
    middle = time.perf_counter()
    lda = train_lda(encoded, len(vocabulary.words), cfg.n_topics, cfg.lda, seed)
    model = TopicModel(name, vocabulary, docnade, history, lda, {"docnade": middle - start, "lda": time.perf_counter() - middle})
    if not (~training).any():
        notes.append(f"no ticket held out of {tokens.tickets.height}, so no held-out perplexity")
    return replace(model, perplexity=heldout_perplexity(tokens, model, cfg, seed), notes=tuple(notes))


def said_of(models: dict[str, TopicModel]) -> list[str]:
    """One line per thing a small knowledge base made the models shrink or skip, naming the models it concerns."""
    concerned: dict[str, list[str]] = {}
    for model in models.values():
        for note in model.notes:
            concerned.setdefault(note, []).append(model.name.upper())
    return [f"{' and '.join(names)}: {note}" for note, names in concerned.items()]


def heldout_perplexity(tokens: Tokens, model: TopicModel, cfg: TopicsConfig, seed: int) -> dict:
    """The model's row of the perplexity table: {docnade, lda, lda_bound} -> component -> perplexity on the held-out
    tickets, its vocabulary and best epoch. Adds the time it took to the model's `seconds`."""
    _, tickets = component_texts(tokens)
    heldout = heldout_mask(tokens.tickets.height, cfg.heldout, seed)
    start, scores = time.perf_counter(), {"docnade": {}, "lda": {}, "lda_bound": {}}
    for component in COMPONENTS:
        documents = [model.vocabulary.encode(doc) for doc, held in zip(tickets[component], heldout) if held]
        lengths = np.array([len(doc) for doc in documents])
        nll = {"docnade": document_nll(model.docnade, documents),
               "lda": left_to_right_nll(model.lda, documents, cfg.lda.particles, seed, cfg.lda.moves),
               "lda_bound": variational_nll(model.lda, documents)}
        for kind, values in nll.items():
            scores[kind][component] = document_perplexity(values, lengths)
    model.seconds["perplexity"] = time.perf_counter() - start
    best_epoch = min(model.history, key=lambda h: h["validation_perplexity"])["epoch"]
    # None, not NaN, where no held-out ticket has a word: the metrics file stays JSON
    return {**{k: {c: None if np.isnan(v) else round(v, 3) for c, v in s.items()} for k, s in scores.items()},
            "vocabulary": len(model.vocabulary.words), "epochs": best_epoch}


def perplexity_markdown(table: dict, models: dict[str, TopicModel], title: str, heldout: int) -> str:
    """The perplexity table (component x model) and the training record, for a person."""
    names = list(table)
    header = " | ".join(f"DocNADE {n.upper()} | LDA {n.upper()} | LDA {n.upper()} bound" for n in names)
    lines = [f"# {title}: held-out perplexity ({heldout} tickets)", "",
             "Perplexity = exp(mean over held-out documents of NLL_d / |d|), |d| = in-vocabulary words. DocNADE's NLL is "
             "exact; LDA's is the left-to-right estimate (Wallach et al. 2009); the bound column is LDA's per-document "
             "variational bound, an upper bound on its perplexity.", "",
             f"| component | {header} |", "|" + " --- |" * (1 + 3 * len(names))]
    for component in COMPONENTS:
        cells = []
        for n in names:
            cells += ["–" if table[n][kind][component] is None else f"{table[n][kind][component]:.1f}"
                      for kind in ("docnade", "lda", "lda_bound")]
        lines.append(f"| {component.upper()} | " + " | ".join(cells) + " |")
    lines += ["", "| model | trained on | vocabulary | DocNADE epochs (kept / run) | DocNADE s | LDA s | perplexity s |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for n in names:
        s = models[n].seconds
        lines.append(f"| {n.upper()} | {MODELS[n].upper()} | {table[n]['vocabulary']} | {table[n]['epochs']} / {len(models[n].history)} "
                     f"| {s['docnade']:.1f} | {s['lda']:.1f} | {s['perplexity']:.1f} |")
    return "\n".join(lines) + "\n"


def topic_vectors(tokens: Tokens, models: dict[str, TopicModel], space: str = "m2") -> ChannelVectors:
    """Channel T of every query and ticket component, each from the model `space` assigns it."""
    queries, tickets = component_texts(tokens)

    def side(texts: dict[str, list[list[str]]]) -> dict[str, np.ndarray]:
        model = {c: models[model_of(c, space)] for c in texts}
        return {c: represent(model[c].docnade, [model[c].vocabulary.encode(doc) for doc in docs]) for c, docs in texts.items()}

    return ChannelVectors("T", tuple(tokens.queries["query_id"]), tuple(tokens.tickets["ticket_id"]), side(queries), side(tickets))


def topic_words(model: TopicModel, k: int, kind: str = "docnade") -> list[list[str]]:
    """The top k words of each topic: DocNADE's by the input weights W (see docnade.top_words), LDA's by phi."""
    weights = model.docnade.W.detach().numpy() if kind == "docnade" else model.lda.topic_word
    return top_words(weights, model.vocabulary, k)


def coherence_table(tokens: Tokens, models: dict[str, TopicModel], k: int) -> dict[str, dict[str, np.ndarray]]:
    """model -> docnade|lda -> each topic's NPMI coherence of its top COHERENCE_WORDS words (of k) on every ticket's text
    that the model learns from (M2: SUB+DESC+SOL, the texts a search index holds)."""
    _, tickets = component_texts(tokens)
    return {name: {kind: npmi_coherence([words[:COHERENCE_WORDS] for words in topic_words(model, k, kind)], tickets[MODELS[name]])
                   for kind in ("docnade", "lda")} for name, model in models.items()}


def coherence_summary(table: dict[str, dict[str, np.ndarray]], threshold: float) -> dict:
    """The topics stage's metrics: per model and kind, the mean and median NPMI and how many topics reach `threshold`."""
    return {"threshold": threshold, "words": COHERENCE_WORDS,
            **{name: {kind: {"npmi_mean": round(float(np.mean(values)), 4), "npmi_median": round(float(np.median(values)), 4),
                             "coherent": int(np.sum(values >= threshold)), "topics": len(values)}
                      for kind, values in kinds.items()} for name, kinds in table.items()}}


def topic_words_markdown(models: dict[str, TopicModel], k: int, title: str, coherence: dict[str, dict[str, np.ndarray]],
                         threshold: float) -> str:
    """The paper's Table 8: the top k words of every DocNADE topic (hidden unit), LDA's topics beside them, each with its
    NPMI coherence; a search names a DocNADE M2 topic only at `threshold` or above."""
    lines = [f"# {title}: topic words", "",
             "DocNADE: the words with the largest input weight W[j, w] of hidden unit j (the words that turn topic j on in "
             "T). LDA: the most probable words of topic j (unrelated numbering).", "",
             f"NPMI: the topic's coherence, the mean normalised PMI of every pair of its first {COHERENCE_WORDS} words by "
             "their co-occurrence in the tickets' text the model learns from (-1: never together, 0: independent, 1: always "
             f"together). A search shows a shared DocNADE {REASON_MODEL.upper()} topic's words only at NPMI >= {threshold:g} "
             "(`topics.coherence`; marked *shown*).", ""]
    for name, model in models.items():
        docnade, lda = topic_words(model, k, "docnade"), topic_words(model, k, "lda")
        scores = coherence[name]
        lines += [f"## {name.upper()} ({MODELS[name].upper()})", "",
                  f"Coherent topics (NPMI >= {threshold:g}): DocNADE {int(np.sum(scores['docnade'] >= threshold))} of {len(docnade)}, "
                  f"LDA {int(np.sum(scores['lda'] >= threshold))} of {len(lda)}; mean NPMI DocNADE "
                  f"{np.mean(scores['docnade']):.3f}, LDA {np.mean(scores['lda']):.3f}.", "",
                  "| topic | DocNADE | NPMI | LDA | NPMI |", "| --- | --- | ---: | --- | ---: |"]
        for j, (words, lda_words) in enumerate(zip(docnade, lda)):
            npmi = f"{scores['docnade'][j]:.3f}" + (" *shown*" if name == REASON_MODEL and scores["docnade"][j] >= threshold else "")
            lines.append(f"| {j} | {' '.join(words)} | {npmi} | {' '.join(lda_words)} | {scores['lda'][j]:.3f} |")
        lines.append("")
    return "\n".join(lines)


def load_topic_models(directory: str | Path) -> dict[str, TopicModel]:
    return {name: TopicModel.load(directory, name) for name in MODELS}


TOPIC_MODELS = "docnade"     # T's models folder in a bundle (m1.pt, m2.pt, lda_m1.npz, lda_m2.npz)


def fit_topics(fitting: Fitting) -> Fitted:
    """DocNADE M1 (SUB+DESC) and M2 (SUB+DESC+SOL), each with an LDA, trained on the historical tickets and scored on
    held-out ones (the perplexity table); T of every component (from M1 or M2: topics.space) and the topic-words report
    with each topic's NPMI coherence."""
    cfg, tokens = fitting.params.topics, fitting.tokens
    models = fit_topic_models(tokens, cfg, fitting.params.seed)
    for model in models.values():
        model.save(fitting.models)
    perplexity = {name: model.perplexity for name, model in models.items()}
    coherence = coherence_table(tokens, models, cfg.top_words)
    heldout = heldout_count(tokens.tickets.height, cfg.heldout)
    summary = coherence_summary(coherence, cfg.coherence)
    return Fitted(
        topic_vectors(tokens, models, cfg.space), {"perplexity": perplexity, "coherence": summary},
        logged={"perplexity": perplexity, "coherence": {name: kinds for name, kinds in summary.items() if isinstance(kinds, dict)},
                "seconds": {name: model.seconds for name, model in models.items()}},
        series=[(model.name, record["epoch"], {k: v for k, v in record.items() if k != "epoch"})
                for model in models.values() for record in model.history],
        reports={"perplexity.md": perplexity_markdown(perplexity, models, fitting.dataset, heldout),
                 "topic_words.md": topic_words_markdown(models, cfg.top_words, fitting.dataset, coherence, cfg.coherence)},
        said=said_of(models))


def topics_of(scorer: Any, texts: Texts) -> ChannelVectors:
    """T of new texts from a bundle's topic models."""
    return topic_vectors(texts.tokens, scorer.topics)


CHANNEL = Channel("T", "topics", "topics", "params-research.yaml", fit_topics, topics_of, bundle={TOPIC_MODELS: "."})
