"""A tiny randomly initialised sentence-transformers encoder built in code (no download): a WordPiece vocabulary of
the given texts' most frequent words and their characters, a 2-layer BERT of width 16, mean pooling and unit length,
as all-MiniLM-L6-v2 is built."""
import os
from collections import Counter
from pathlib import Path

import torch


def tiny_encoder(folder: Path, texts: list[str], seed: int = 0, positions: int = 64, vocab_size: int = 300) -> Path:
    """Write the encoder to `folder` (a sentence-transformers folder, as channel F saves its fine-tuned one), reading at
    most `positions` word pieces."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as st_models
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, BertTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    normalizer, pre_tokenizer = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    # Counted here, not by WordPieceTrainer: the trainer breaks ties in an order that differs from process to process,
    # and so did the vocabulary, the vectors and near-tie rankings of the tests that use this encoder.
    words = Counter(word for text in texts for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    chars = sorted({char for word in words for char in word})
    frequent = sorted(words, key=lambda word: (-words[word], word))
    vocab = list(dict.fromkeys(specials + chars + [f"##{char}" for char in chars] + frequent))[:vocab_size]
    tokenizer = Tokenizer(models.WordPiece({token: i for i, token in enumerate(vocab)}, unk_token="[UNK]"))
    tokenizer.normalizer, tokenizer.pre_tokenizer, tokenizer.decoder = normalizer, pre_tokenizer, decoders.WordPiece()
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
                                                             special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    raw = folder.parent / f".{folder.name}-bert"
    BertTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
                      mask_token="[MASK]", model_max_length=positions).save_pretrained(raw)
    torch.manual_seed(seed)
    BertModel(BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=positions)).save_pretrained(raw)
    transformer = st_models.Transformer(str(raw), max_seq_length=positions)
    modules = [transformer, st_models.Pooling(transformer.get_embedding_dimension(), "mean"), st_models.Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(folder))
    return folder
