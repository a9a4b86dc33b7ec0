"""Stage tune: the Optuna study of the final variant's W, V and hidden size on one dataset's train and dev pairs."""
import sys

from ticketsim.config import ConfigError
from ticketsim.stage import Arg, Stage
from ticketsim.tuning.tuner import run, tuning_inputs, untuned_line
from ticketsim.workflows.stage_process import script

STAGE = Stage("tune", __doc__, reads=("corpus", "tokens", "channels"), writes=("metrics", "plots"),
              options={"workers": Arg("processes running trials at once (default: tune.workers)", required=False, type=int),
                       "out": "YAML file of the tuned variant: channels, levels, hidden"})


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    try:
        run(params, stage.dataset,
            lambda: tuning_inputs(params, args.corpus, args.tokens, args.channels),
            args.out, args.metrics, args.plots, args.workers)
    except ConfigError as error:   # one the data decides: e.g. tune.folds above the train + dev queries
        sys.exit(f"tune@{stage.dataset}: {error}")
    if line := untuned_line(params, stage.dataset, args.out):
        print(line)


if __name__ == "__main__":
    script(main)
