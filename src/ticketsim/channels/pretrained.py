"""Channel S's declaration (ticketsim.channels.registry): a pretrained sentence encoder (ticketsim.channels.sentence),
fitted on nothing, its vectors of every ticket and query component cached; a bundle names the encoder (manifest
`sentence`) and copies no file of it. Apart from sentence.py, which runs where polars is not installed."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ticketsim.channels.cache import ChannelVectors
from ticketsim.channels.channel import Channel, Fitted, Fitting, Texts
from ticketsim.errors import StepError


def fit_sentence(fitting: Fitting) -> Fitted:
    """S of every component, encoded here or on a Ray cluster (params `encode`: where, not what: the same vectors)."""
    from ticketsim.channels.encoder_files import EncoderError
    from ticketsim.channels.ray_encode import ray_encoding
    from ticketsim.channels.sentence import encode_local, sentence_channel

    params = fitting.params
    try:
        encode = ray_encoding(params.sentence) if params.encode.engine == "ray" else encode_local
        vectors, report = sentence_channel(fitting.corpus, params.sentence, encode=encode)
    except EncoderError as error:
        raise StepError(str(error)) from error
    return Fitted(vectors, {key: value for key, value in asdict(report).items() if key not in ("model", "folder")},
                  about=report.model)


def sentence_of(scorer: Any, texts: Texts) -> ChannelVectors:
    """S of the components the model reads, with the bundle's encoder (loaded once: a searcher encodes one query at a time)."""
    from ticketsim.channels.sentence import sentence_channel  # sentence-transformers only when S is read

    return sentence_channel(texts.corpus, scorer.sentence, False, scorer.sentence_encoder, components=texts.components)[0]


CHANNEL = Channel("S", "sentence_encoder", "sentence", "params.yaml", fit_sentence, sentence_of, reuse=True)
