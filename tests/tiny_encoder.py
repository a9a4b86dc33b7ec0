"""A tiny randomly initialised sentence-transformers encoder built in code (no download): a WordPiece vocabulary learnt
from the given texts, a 2-layer BERT of width 16, mean pooling and unit length, as all-MiniLM-L6-v2 is built."""
import os
from pathlib import Path

import torch


def tiny_encoder(folder: Path, texts: list[str], seed: int = 0, positions: int = 64) -> Path:
    """Write the encoder to `folder` (a sentence-transformers folder, as channel F saves its fine-tuned one), reading at
    most `positions` word pieces."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as st_models
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, BertTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=300, special_tokens=specials))
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
