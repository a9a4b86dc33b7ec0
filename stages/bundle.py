"""Stage bundle: the final variant as one self-contained bundle folder (weights, calibrator, channel models, settings),
the model the index stage indexes with and the register stage logs to MLflow."""
from ticketsim.scorer import final_bundle
from ticketsim.stage import Stage

STAGE = Stage("bundle", __doc__, reads=("word2vec", "char_blstm", "docnade"),
              options={"model": "the final stage's folder", "out": "the bundle folder"})


def main() -> None:
    stage = STAGE.start()
    args = stage.args
    bundle = final_bundle(args.out, stage.params, args.model, args.word2vec, args.char_blstm, args.docnade)
    print(f"bundle@{stage.dataset}: {bundle}")


if __name__ == "__main__":
    main()
