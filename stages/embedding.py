"""Stage embedding: channel E of one dataset. word2vec trained with gensim on every ticket and query text, the character
BiLSTM trained to predict each word2vec word's vector from its spelling, then E of every ticket and query component (the
sum of its word2vec ++ char-BLSTM word vectors), cached. One process for the three: each is seconds of work."""
import time
from dataclasses import asdict
from pathlib import Path

from ticketsim.channels.char_blstm import save_checkpoint, train_char_blstm
from ticketsim.channels.projection import fault_types, projection_plot
from ticketsim.channels.sumemb import spelling_neighbours, sumemb_vectors
from ticketsim.channels.word2vec import corpus_sentences, load_pretrained, neighbours, save_vectors, train_word2vec
from ticketsim.lifecycle.tracking import log_dict, log_metrics
from ticketsim.stage import Stage
from ticketsim.text.tokenize import Tokens

STAGE = Stage("embedding", __doc__, reads=("tokens",), writes=("metrics", "plots"),
              options={"word2vec": "the word vectors to write (gensim KeyedVectors, .kv)",
                       "char_blstm": "the character BiLSTM to write (.pt): model spec, weights, alphabet",
                       "out": "the channel cache to write (.npz, ticketsim.channels.cache format)"})


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    cfg = params.embedding
    with stage.run({"embedding": cfg, "seed": params.seed}):
        tokens = Tokens.read(args.tokens)
        started = time.perf_counter()
        pretrained = load_pretrained(cfg.word2vec.pretrained) if cfg.word2vec.pretrained else None
        word2vec, word2vec_report = train_word2vec(corpus_sentences(tokens), cfg.word2vec, params.seed, pretrained)
        save_vectors(word2vec, args.word2vec)
        if word2vec_report.min_count < cfg.word2vec.min_count:
            print(f"embedding@{stage.dataset}: no word occurs embedding.word2vec.min_count ({cfg.word2vec.min_count}) times "
                  f"in the tickets, so word2vec learns every word ({word2vec_report.vocabulary})")
        figures = {"word2vec": {**asdict(word2vec_report), "seconds": round(time.perf_counter() - started, 1)}}

        started = time.perf_counter()
        chars, chars_report = train_char_blstm(word2vec.index_to_key, word2vec.vectors, cfg.char_blstm, params.seed)
        save_checkpoint(chars, args.char_blstm)
        for epoch, loss in enumerate(chars_report.epoch_loss):
            log_metrics({"char_blstm.loss": loss}, step=epoch)
        figures["char_blstm"] = {**{key: round(value, 4) if isinstance(value, float) else value
                                    for key, value in asdict(chars_report).items() if key != "epoch_loss"},
                                 "seconds": round(time.perf_counter() - started, 1)}

        started = time.perf_counter()
        vectors, report = sumemb_vectors(tokens, word2vec, chars)
        vectors.save(args.out)
        figures["sumemb"] = {**asdict(report), "seconds": round(time.perf_counter() - started, 1)}
        stage.metrics(figures)

        # The vectors are DVC outputs; MLflow gets summaries people can read: neighbours of frequent words, the tickets'
        # E by fault type, and what the char part is for: frequent words word2vec lacks and the known word each is spelt most like.
        vocabulary = tokens.vocabulary()["token"].to_list()
        frequent = [word for word in vocabulary if word.isalpha() and len(word) > 4][:25]
        log_dict({"dim": word2vec.vector_size, **figures["word2vec"], "neighbours": neighbours(word2vec, frequent)},
                 "word2vec_summary.json")
        subjects = tokens.tickets["subject"].to_list()
        labels = fault_types(subjects) if stage.dataset_config.source == "synthetic" else ["ticket"] * len(subjects)
        projection_plot(vectors.tickets["sub+desc+sol"], labels, Path(args.plots) / "tickets.png",
                        f"{stage.dataset}: E of ticket SUB+DESC+SOL (PCA of unit-length vectors)")
        log_dict(spelling_neighbours([word for word in vocabulary if word.isalpha()], word2vec, chars, n=50),   # not dates, codes
                 "unknown_words.json")


if __name__ == "__main__":
    main()
