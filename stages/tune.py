"""Stage tune: the Optuna search of the final variant's W, V and hidden size on one dataset's train and dev pairs."""
import sys

from ticketsim.config import ConfigError
from ticketsim.stage import Arg, Stage
from ticketsim.tuning.tuner import prepared_for_tuning, run, unsearched_line
from ticketsim.workflows.stage_process import script

STAGE = Stage("tune", __doc__, reads=("corpus", "tokens", "word2vec", "char_blstm"), writes=("metrics", "plots"),
              options={"channels": Arg("cached channel vectors (.npz): E, T, S", many=True),
                       "workers": Arg("processes running trials at once (default: tune.workers)", required=False, type=int),
                       "out": "YAML file of the tuned variant: channels, levels, hidden"})


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    try:
        run(params, stage.dataset,
            lambda: prepared_for_tuning(params, args.corpus, args.tokens, args.word2vec, args.char_blstm, args.channels),
            args.out, args.metrics, args.plots, args.workers)
    except ConfigError as error:   # one the data decides: e.g. tune.folds above the train + dev queries
        sys.exit(f"tune@{stage.dataset}: {error}")
    if line := unsearched_line(params, stage.dataset, args.out):
        print(line)


if __name__ == "__main__":
    script(main)
