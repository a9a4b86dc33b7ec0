"""Stage channel: one cached channel of one dataset (ticketsim.channels.registry.CHANNELS: E, T, S, ...). Its models
fitted on the dataset's texts into <out>/<name>/, its vectors of every ticket and query component into <out>/<name>.npz,
its figures, reports and a picture of the tickets' vectors; the MLflow run is tagged with the channel's stage name
(embedding, topics, sentence_encoder)."""
import sys
from pathlib import Path

from ticketsim.channels.projection import fault_types, projection_plot
from ticketsim.channels.registry import CHANNELS, fit_channel
from ticketsim.config import ConfigError
from ticketsim.data.tables import Corpus
from ticketsim.errors import StepError
from ticketsim.lifecycle.tracking import log_dict, log_metrics
from ticketsim.stage import Arg, Stage
from ticketsim.text.tokenize import Tokens
from ticketsim.workflows.stage_process import script

STAGE = Stage("channel", __doc__, reads=("corpus", "tokens"), writes=("metrics", "reports", "plots"),
              options={"channel": Arg(f"a channel of the registry ({', '.join(CHANNELS)})"),
                       "out": "the dataset's channels folder: the channel's cache <name>.npz and models <name>/ go in it"})


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    channel = CHANNELS[args.channel]
    said = f"{channel.stage}@{stage.dataset}"
    with stage.run({channel.section: getattr(params, channel.section), "seed": params.seed}, stage=channel.stage):
        tokens = Tokens.read(args.tokens)
        try:
            fitted = fit_channel(channel.name, params, stage.dataset, Corpus.read(args.corpus), tokens, args.out)
        except (ConfigError, StepError) as error:
            sys.exit(f"{said}: {error}")
        for line in fitted.said:
            print(f"{said}: {line}")
        for prefix, step, figures in fitted.series:
            log_metrics(figures, prefix=prefix, step=step)
        reports = Path(args.reports)
        reports.mkdir(parents=True, exist_ok=True)
        for name, text in fitted.reports.items():
            (reports / name).write_text(text)
        stage.metrics(fitted.metrics, logged=fitted.logged)
        for name, values in fitted.summaries.items():
            log_dict(values, name)
        subjects = tokens.tickets["subject"].to_list()
        labels = fault_types(subjects) if stage.dataset_config.source == "synthetic" else ["ticket"] * len(subjects)
        projection_plot(fitted.vectors.tickets["sub+desc+sol"], labels, Path(args.plots) / "tickets.png",
                        f"{stage.dataset}: {channel.name} of ticket SUB+DESC+SOL ({fitted.about + ', ' if fitted.about else ''}"
                        "PCA of unit-length vectors)")


if __name__ == "__main__":
    script(main)
