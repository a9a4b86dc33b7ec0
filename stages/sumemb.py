"""Stage sumemb: channel E of every ticket and query component (sum of word2vec ++ char-BLSTM word vectors), cached."""
import time
from dataclasses import asdict
from pathlib import Path

from ticketsim.channels.char_blstm import load_checkpoint
from ticketsim.channels.projection import fault_types, projection_plot
from ticketsim.channels.sumemb import spelling_neighbours, sumemb_vectors
from ticketsim.channels.word2vec import load_vectors
from ticketsim.stage import Stage
from ticketsim.text.tokenize import Tokens
from ticketsim.tracking import log_dict

STAGE = Stage("sumemb", __doc__, reads=("tokens", "word2vec", "char_blstm"), writes=("metrics", "plots"),
              options={"out": "the channel cache (.npz, ticketsim.channels.cache format)"})


def main() -> None:
    stage = STAGE.start()
    args = stage.args
    with stage.run():
        started = time.perf_counter()
        tokens, word2vec, chars = Tokens.read(args.tokens), load_vectors(args.word2vec), load_checkpoint(args.char_blstm)
        vectors, report = sumemb_vectors(tokens, word2vec, chars)
        vectors.save(args.out)
        stage.metrics({**asdict(report), "seconds": round(time.perf_counter() - started, 1)})
        subjects = tokens.tickets["subject"].to_list()
        labels = fault_types(subjects) if stage.dataset_config.source == "synthetic" else ["ticket"] * len(subjects)
        projection_plot(vectors.tickets["sub+desc+sol"], labels, Path(args.plots) / "tickets.png",
                        f"{stage.dataset}: E of ticket SUB+DESC+SOL (PCA of unit-length vectors)")
        # What the char part is for: the most frequent words word2vec lacks, and the known word each is spelt most like.
        words = [word for word in tokens.vocabulary()["token"].to_list() if word.isalpha()]  # not dates and codes
        log_dict(spelling_neighbours(words, word2vec, chars, n=50), "unknown_words.json")


if __name__ == "__main__":
    main()
