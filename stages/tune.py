"""Stage tune: the Optuna search of the final variant's W, V and hidden size on one dataset's train and dev pairs."""
import argparse

from ticketsim.config import load_params
from ticketsim.tune import run, stage_problem


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--corpus", required=True, help="the prepare stage's folder")
    parser.add_argument("--tokens", required=True, help="the tokenize stage's folder")
    parser.add_argument("--word2vec", required=True, help="the word2vec stage's vectors (.kv)")
    parser.add_argument("--char-blstm", required=True, help="the char_blstm stage's checkpoint (.pt)")
    parser.add_argument("--channels", nargs="*", default=[], help="cached channel vectors (.npz): E, T")
    parser.add_argument("--out", required=True, help="YAML file of the tuned variant: channels, levels, hidden")
    parser.add_argument("--metrics", required=True, help="JSON: best vs default dev figures, trials, pruning, seconds")
    parser.add_argument("--plots", required=True, help="folder for the study's plots")
    parser.add_argument("--workers", type=int, default=None, help="processes running trials at once (default: tune.workers)")
    parser.add_argument("--base-model", help="rescore mode: the siamese stage's folder of siamese.final (else one is trained here)")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    run(params, args.dataset,
        lambda: stage_problem(params, args.dataset, args.corpus, args.tokens, args.word2vec, args.char_blstm, args.channels),
        args.out, args.metrics, args.plots, args.workers, args.base_model)


if __name__ == "__main__":
    main()
