"""Stage table5: one results table of every method on one dataset (the paper's Table 5 rows #1-22, BM25, ...), the
rows trained over seeds as mean ± sd, and the paper's claims held or not by a paired test over the dev queries."""
import json
from pathlib import Path

from ticketsim.evaluate.report import SD, registered_note, table5, write_results
from ticketsim.lifecycle.tracking import log_methods, log_metrics
from ticketsim.stage import Arg, Stage
from ticketsim.training.claims import claims_report, judged

STAGE = Stage("table5", __doc__, writes=("metrics", "reports", "plots"),
              options={"inputs": Arg("metrics JSON files (method -> split -> protocol -> measure) or folders of them", many=True)},
              needs_labels=True)


def main() -> None:
    stage = STAGE.start()
    args = stage.args
    with stage.run(context="eval"):
        paths = [p for arg in map(Path, args.inputs) for p in (sorted(arg.glob("*.json")) if arg.is_dir() else [arg])]
        table = table5([json.loads(p.read_text()) for p in paths])
        claims = judged(table.seeds)
        registered = f"#{stage.params.siamese.final_row(stage.dataset_config)}"
        write_results(table.results, args.metrics, args.reports, args.plots, f"{stage.dataset}: Table 5", table.blocks,
                      table.sd, {"claims": claims}, registered, registered_note(registered, stage.dataset_config.protocol))
        (Path(args.reports) / "claims.md").write_text(claims_report(table, claims))
        log_metrics({key: {"mean_difference": c["mean_difference"], "p": c["p"], "held": float(c["held"])}
                     for key, c in claims.items()}, prefix="claims")
        # one child run per method (sd.*: its spread over seeds): compare them all, one column per figure; param `block`
        log_methods({method: {**figures, SD: table.sd[method]} if method in table.sd else figures
                     for method, figures in table.results.items()}, {method: {"block": block} for method, block in table.blocks.items()})


if __name__ == "__main__":
    main()
