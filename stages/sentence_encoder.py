"""Stage sentence_encoder: channel S, a pretrained sentence encoder's vector of every ticket and query component, cached."""
import sys
from dataclasses import asdict
from pathlib import Path

from ticketsim.channels.projection import fault_types, projection_plot
from ticketsim.channels.ray_encode import ray_encoding
from ticketsim.channels.sentence import EncoderError, encode_local, sentence_channel
from ticketsim.config import ConfigError
from ticketsim.data.tables import Corpus
from ticketsim.stage import Stage

STAGE = Stage("sentence_encoder", __doc__, reads=("corpus",), writes=("metrics", "plots"),
              options={"out": "the channel cache (.npz, ticketsim.channels.cache format)"})


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    with stage.run({"sentence": params.sentence}):
        corpus = Corpus.read(args.corpus)
        try:
            encode = ray_encoding(params.sentence) if params.encode.engine == "ray" else encode_local
            vectors, report = sentence_channel(corpus, params.sentence, encode=encode)
        except (EncoderError, ConfigError) as error:
            sys.exit(f"sentence_encoder@{stage.dataset}: {error}")
        vectors.save(args.out)
        stage.metrics({key: value for key, value in asdict(report).items() if key not in ("model", "folder")})
        subjects = [subject.lower().split() for subject in corpus.tickets["subject"].fill_null("")]
        labels = fault_types(subjects) if stage.dataset_config.source == "synthetic" else ["ticket"] * len(subjects)
        projection_plot(vectors.tickets["sub+desc+sol"], labels, Path(args.plots) / "tickets.png",
                        f"{stage.dataset}: S of ticket SUB+DESC+SOL ({report.model}, PCA of unit-length vectors)")


if __name__ == "__main__":
    main()
