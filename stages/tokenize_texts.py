"""Stage tokenize: a prepared dataset -> token lists per component (SUB, DESC, SOL) and a vocabulary with counts.

(Not named tokenize.py: that would shadow the standard library module of that name.)
"""
from ticketsim.data.tables import Corpus
from ticketsim.stage import Stage
from ticketsim.text.tokenize import make_tokenizer, token_stats, tokenize_corpus

STAGE = Stage("tokenize", __doc__, reads=("corpus",), writes=("metrics",),
              options={"out": "folder for tickets/queries/vocab.parquet"})


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    with stage.run({"text": params.text}):
        corpus = Corpus.read(args.corpus)
        tokens = tokenize_corpus(corpus, make_tokenizer(params.text, corpus))
        tokens.write(args.out)
        stage.metrics(token_stats(tokens))


if __name__ == "__main__":
    main()
