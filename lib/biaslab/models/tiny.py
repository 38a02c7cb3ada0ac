"""Tiny randomly initialised models with a byte-level tokenizer, for tests and examples (no hub needed)."""

from __future__ import annotations

import os
from pathlib import Path

from .embedded import KINDS


def _byte_tokenizer(kind: str):
    """A tokenizer with one token per byte (no merges), so any text round-trips; special tokens per ``kind``."""
    from tokenizers import Tokenizer, decoders, models as tmodels, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = {"causal": ["<pad>", "<bos>", "<eos>", "<unk>"],
                "seq2seq": ["<pad>", "</s>", "<unk>"],
                "masked": ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]}[kind]
    byte_chars = sorted(set(pre_tokenizers.ByteLevel.alphabet()))
    vocab = {t: i for i, t in enumerate(specials + byte_chars)}
    tok = Tokenizer(tmodels.BPE(vocab=vocab, merges=[], unk_token=specials[-1] if kind == "causal" else None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    if kind == "seq2seq":
        tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
        return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    if kind == "masked":
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
        return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]",
                                       cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>",
                                   unk_token="<unk>")


def save_tiny_model(folder: str | os.PathLike, kind: str = "causal", seed: int = 0, arch: str = "llama") -> Path:
    """Write a tiny randomly initialised model of ``kind`` with a byte-level tokenizer to ``folder``.

    For tests and examples that need a real transformers model but not a trained one (the hub is not needed):
    a 2-layer Llama (causal), T5 (seq2seq) or BERT (masked) with hidden size 32. ``arch="gemma3"`` (causal) gives a
    3-layer Gemma 3 whose first two layers attend only to the last 8 positions, to test sliding-window attention.
    Load it with ``load(folder)``.
    """
    import torch
    from transformers import (BertConfig, BertForMaskedLM, LlamaConfig, LlamaForCausalLM, T5Config,
                              T5ForConditionalGeneration)

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    folder = Path(folder)
    tok = _byte_tokenizer(kind)
    n = len(tok)
    torch.manual_seed(seed)
    if kind == "causal" and arch == "gemma3":
        from transformers import Gemma3ForCausalLM, Gemma3TextConfig
        cfg = Gemma3TextConfig(vocab_size=n, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                               num_attention_heads=4, num_key_value_heads=2, head_dim=8, sliding_window=8,
                               layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                               max_position_embeddings=512, bos_token_id=tok.bos_token_id,
                               eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, initializer_range=0.3)
        model = Gemma3ForCausalLM(cfg)
    elif kind == "causal":
        cfg = LlamaConfig(vocab_size=n, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                          bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                          pad_token_id=tok.pad_token_id, tie_word_embeddings=False, initializer_range=0.3)
        model = LlamaForCausalLM(cfg)
    elif kind == "seq2seq":
        cfg = T5Config(vocab_size=n, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                       pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                       decoder_start_token_id=tok.pad_token_id, initializer_factor=1.5)
        model = T5ForConditionalGeneration(cfg)
    else:
        cfg = BertConfig(vocab_size=n, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=512, pad_token_id=tok.pad_token_id,
                         initializer_range=0.3)
        model = BertForMaskedLM(cfg)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
