"""The params: params.yaml and params-research.yaml -> typed, frozen dataclasses, read once and passed down. The only
package that reads the params files; its modules: coerce (a mapping -> a dataclass), schema (every key, its default and
help), load (the files), names (what the params name, checked against each other), workspace (where the
pipeline keeps each dataset's files, for the code and dvc.yaml's vars), edit (params.yaml's text), reference (docs/params.md)."""
from ticketsim.config.coerce import ConfigError, build, coerce
from ticketsim.config.edit import set_dataset
from ticketsim.config.load import (
    RESEARCH,
    SEMEVAL_FILES,
    csv_delimiter,
    homes,
    load_columns,
    load_params,
    load_tuned,
    read_yaml,
    text_encoding,
    with_default_files,
)
from ticketsim.config.reference import reference_markdown
from ticketsim.config.schema import (
    BM25Config,
    ChannelRows,
    CharBLSTMConfig,
    ColumnMapping,
    ComparatorsConfig,
    DatasetConfig,
    DocNADETrainConfig,
    EmbeddingConfig,
    EncodeConfig,
    EncoderConfig,
    EvaluationConfig,
    FinetuneConfig,
    GateConfig,
    GateRule,
    GraphConfig,
    IndexConfig,
    LDAConfig,
    MiningConfig,
    Params,
    PrunerConfig,
    RetrainConfig,
    ReviewConfig,
    SentenceConfig,
    ServeConfig,
    SiameseParams,
    SyntheticConfig,
    TextConfig,
    TextLengths,
    TopicsConfig,
    TopicVocabularyConfig,
    TrackingConfig,
    TrainConfig,
    TuneConfig,
    TuningSpace,
    VariantConfig,
    Word2VecConfig,
    param,
)
from ticketsim.config.workspace import Workspace, workspace_vars

__all__ = [
    "RESEARCH", "SEMEVAL_FILES", "BM25Config", "ChannelRows", "CharBLSTMConfig", "ColumnMapping", "ComparatorsConfig",
    "ConfigError", "DatasetConfig", "DocNADETrainConfig", "EmbeddingConfig", "EncodeConfig", "EncoderConfig",
    "EvaluationConfig", "FinetuneConfig", "GateConfig", "GateRule", "GraphConfig", "IndexConfig", "LDAConfig", "MiningConfig", "Params",
    "PrunerConfig", "RetrainConfig", "ReviewConfig", "SentenceConfig", "ServeConfig", "SiameseParams", "SyntheticConfig",
    "TextConfig", "TextLengths", "TopicVocabularyConfig", "TopicsConfig", "TrackingConfig", "TrainConfig", "TuneConfig",
    "TuningSpace", "VariantConfig", "Word2VecConfig", "build", "coerce", "csv_delimiter", "homes", "load_columns", "load_params",
    "load_tuned", "param", "read_yaml", "reference_markdown", "set_dataset", "text_encoding", "with_default_files",
    "Workspace", "workspace_vars",
]
