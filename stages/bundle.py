"""Stage bundle: the final variant as one self-contained bundle folder (weights, calibrator, channel models, settings),
the model the index stage indexes with and the register stage logs to MLflow; with its query export when the variant
allows one (ticketsim.search.queries: a search then needs no torch)."""
from ticketsim.bundle.writer import final_bundle
from ticketsim.search.queries import export_queries
from ticketsim.stage import Stage
from ticketsim.workflows.stage_process import script

STAGE = Stage("bundle", __doc__, reads=("channels",),
              options={"model": "the final stage's folder", "out": "the bundle folder"})


def main() -> None:
    stage = STAGE.start()
    args = stage.args
    bundle = final_bundle(args.out, stage.params, args.model, args.channels)
    why = export_queries(bundle)
    print(f"bundle@{stage.dataset}: {bundle}; a query " + (f"goes through torch: {why}" if why else "runs without torch (query/)"))


if __name__ == "__main__":
    script(main)
