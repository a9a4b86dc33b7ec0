"""Stage word2vec: channel E's word vectors, trained with gensim on every ticket and query text of one dataset."""
import time
from dataclasses import asdict

from ticketsim.channels.word2vec import corpus_sentences, load_pretrained, neighbours, save_vectors, train_word2vec
from ticketsim.stage import Stage
from ticketsim.text.tokenize import Tokens
from ticketsim.tracking import log_dict

STAGE = Stage("word2vec", __doc__, reads=("tokens",), writes=("metrics",),
              options={"out": "the word vectors (gensim KeyedVectors, .kv)"})


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    cfg = params.embedding.word2vec
    with stage.run({"embedding.word2vec": cfg, "seed": params.seed}):
        started = time.perf_counter()
        tokens = Tokens.read(args.tokens)
        pretrained = load_pretrained(cfg.pretrained) if cfg.pretrained else None
        vectors, report = train_word2vec(corpus_sentences(tokens), cfg, params.seed, pretrained)
        save_vectors(vectors, args.out)
        metrics = {**asdict(report), "seconds": round(time.perf_counter() - started, 1)}
        stage.metrics(metrics)
        # The vectors themselves are a DVC output; MLflow gets a summary people can read: neighbours of frequent words.
        frequent = [word for word in tokens.vocabulary()["token"].to_list() if word.isalpha() and len(word) > 4][:25]
        log_dict({"dim": vectors.vector_size, **metrics, "neighbours": neighbours(vectors, frequent)}, "word2vec_summary.json")


if __name__ == "__main__":
    main()
