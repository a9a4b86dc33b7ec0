"""What every DVC stage script shares: its command line, the params, the MLflow run, the raw path and the metrics file.

A script declares once what it reads and writes, `Stage("baselines", __doc__, reads=("corpus", "tokens"),
writes=("metrics", "reports", "plots"))`, and
`start()` gives it the parsed paths, the params and the dataset (or, for a stage that `needs_labels` on a dataset
without labelled pairs, writes its declared outputs empty, says it skipped, and ends the process); `run()` is the stage's MLflow run
(tracking.stage_run) with the dataset's raw files and prepared corpus as its input, which logs the declared metrics,
reports and plots as artifacts when the work is done; `metrics()` writes the metrics file and logs its figures.
"""
from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ticketsim.config import ConfigError, DatasetConfig, Params, load_params
from ticketsim.workflows.stage_process import refused, skipped

# The files of the pipeline that several stages read or write, by the option that names them.
PIPELINE_FILES = {
    "corpus": "the prepare stage's folder (tickets, queries, pairs)",
    "tokens": "the prepare stage's tokens folder",
    "channels": "the channels stage's folder: each channel's cache <name>.npz and models <name>/ (ticketsim.channels.registry)",
    "bundle": "the bundle stage's folder",
    "metrics": "the stage's figures as JSON (dvc metrics show; logged to the run)",
    "reports": "folder for the stage's Markdown reports",
    "plots": "folder for the stage's PNG plots",
}
ARTIFACTS = ("metrics", "reports", "plots")   # outputs small and readable enough to log with every run


@dataclass(frozen=True)
class Arg:
    """One option of a stage's command line beyond the dataset: a path it reads or writes, or a setting (--variant)."""

    help: str
    required: bool = True
    many: bool = False          # several values: --inputs a.json b.json
    type: type = str


@dataclass(frozen=True)
class Stage:
    """A stage script's declaration: its name (the MLflow stage tag), its docstring, the PIPELINE_FILES it reads and
    writes, and its other options (paths or settings) by name (`char_blstm` is `--char-blstm`), each a help text or an Arg."""

    name: str
    doc: str
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    options: Mapping[str, str | Arg] = field(default_factory=dict)
    # Evaluates or learns from labelled pairs (or does for these arguments): skipped on a dataset with labels: false.
    needs_labels: bool | Callable[[argparse.Namespace], bool] = False

    def parser(self) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog=f"stages/{self.name}", description=self.doc.split("\n\n")[0])
        parser.add_argument("dataset", help="a key of `datasets` in params.yaml")
        for name, spec in {**{name: PIPELINE_FILES[name] for name in self.reads + self.writes}, **self.options}.items():
            arg = spec if isinstance(spec, Arg) else Arg(spec)
            parser.add_argument(f"--{name.replace('_', '-')}", required=arg.required, help=arg.help, type=arg.type,
                                **({"nargs": "*", "default": []} if arg.many else {}))
        parser.add_argument("--params", default="params.yaml")
        return parser

    def start(self, argv: list[str] | None = None) -> StageRun:
        """Parse the command line and read the params; a params file that does not fit, or lacks the dataset, ends the
        process with one line naming the key."""
        args = self.parser().parse_args(argv)
        try:
            params = load_params(args.params).for_dataset(args.dataset)   # siamese.final: the dataset's own
        except ConfigError as error:
            refused(f"{self.name}@{args.dataset}: {error}")
        stage = StageRun(self, args.dataset, params, args)
        needs_labels = self.needs_labels(args) if callable(self.needs_labels) else self.needs_labels
        if needs_labels and not stage.dataset_config.labels:
            stage.skip(f"datasets.{args.dataset} has no labelled pairs (labels: false)")
        return stage


@dataclass(frozen=True)
class StageRun:
    """One run of a stage on one dataset: `args` holds the declared paths and settings by name."""

    stage: Stage
    dataset: str
    params: Params
    args: argparse.Namespace

    @property
    def dataset_config(self) -> DatasetConfig:
        return self.params.dataset(self.dataset)

    def skip(self, reason: str) -> None:
        """End the process without the stage's work: its declared outputs (metrics, reports, plots and `out`, a
        folder) exist as DVC needs them, a metrics JSON saying why, and one line says so."""
        for name in (*(w for w in ARTIFACTS if w in self.stage.writes), *(["out"] if "out" in self.stage.options else [])):
            path = Path(getattr(self.args, name))
            if name == "metrics":   # a file, or a folder of them (rows, comparators)
                path = path if path.suffix == ".json" else path / "skipped.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps({"skipped": reason}) + "\n")
            else:
                path.mkdir(parents=True, exist_ok=True)
        skipped(f"{self.stage.name}@{self.dataset}: skipped, {reason}")

    @contextmanager
    def run(self, logged: Mapping[str, Any] | None = None, *, stage: str | None = None,
            artifacts: tuple[str | Path, ...] | None = None, **options: Any) -> Iterator[Any]:
        """The MLflow run (tracking.stage_run: `logged` as params; name, tags, context, corpus as there) of this stage
        or of `stage`; on success it logs `artifacts`, by default the declared metrics, reports and plots."""
        from ticketsim.lifecycle.tracking import log_artifacts, stage_run  # MLflow: only in the stages that log a run

        corpus = options.pop("corpus", getattr(self.args, "corpus", None))
        with stage_run(self.params.tracking, stage or self.stage.name, self.dataset, logged, corpus=corpus,
                       raw=self.dataset_config.raw, **options) as active:
            yield active
            declared = tuple(getattr(self.args, name) for name in ARTIFACTS if name in self.stage.writes)
            log_artifacts(*(path for path in (declared if artifacts is None else artifacts) if Path(path).exists()))

    def metrics(self, values: Mapping[str, Any], logged: Mapping[str, Any] | None = None, path: str | Path | None = None) -> None:
        """Write `values` to the declared metrics file (what `dvc metrics show` reads; `path`: a file in the declared
        metrics folder) and log `logged` (default: the same figures) to the active MLflow run."""
        from ticketsim.evaluate.report import write_metrics
        from ticketsim.lifecycle.tracking import log_metrics

        write_metrics(values, path or self.args.metrics)
        log_metrics(values if logged is None else logged)

    def method_metrics(self, results: Mapping[str, Any], method: str, path: str | Path) -> None:
        """A trained method's results file written to `path`, and its figures logged (ticketsim.evaluate.report.run_figures:
        over seeds their mean and `sd.*`, and each seed's as `seed.*` at step = the seed)."""
        from ticketsim.evaluate.report import SEEDS, run_figures
        from ticketsim.lifecycle.tracking import log_metrics

        self.metrics(results, logged=run_figures(results, method), path=path)
        for run in results.get(SEEDS, ()):
            log_metrics(run_figures(run, method), prefix="seed", step=run["seed"])
