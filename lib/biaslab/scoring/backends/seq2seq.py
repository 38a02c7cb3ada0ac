"""The in-process backend for encoder-decoder (Flan-T5 style) models: option scoring, labels and generation.

``log P(option | prompt)`` is the decoder's log-likelihood of the option's tokens given the encoded prompt, starting
from the model's ``decoder_start_token_id``. The prompt is encoded once (with the tokenizer's special tokens, e.g.
T5's closing ``</s>``) and shared by all its options. In :meth:`Scorer.option_logprob` the option is a complete
answer: its tokens end with the end-of-sequence token (as lm-evaluation-harness scores seq2seq continuations), which
``n_tokens`` counts. In :meth:`Scorer.label_distribution` a label is the beginning of the answer: no end token.
"""

from __future__ import annotations

import numpy as np

from ..generation import truncate_at_stop
from .local import LocalBackend


def _option_ids(tok, options: list[str], eos: bool) -> list[list[int]]:
    ids = [list(x) for x in tok(options, add_special_tokens=False)["input_ids"]] if options else []
    if eos and tok.eos_token_id is not None:
        ids = [x + [tok.eos_token_id] for x in ids]
    return ids


class Seq2SeqBackend(LocalBackend):
    """Seq2seq models in-process (see the module docstring)."""

    def option_values(self, sc, prompts, opts, chat, eos: bool = True) -> list[list[tuple]]:
        rendered = self.render(prompts, chat)
        tok, model = self.tokenizer, self.model
        items = [[r, o] for r, o in zip(rendered, opts)]
        keys = [sc.cache.key("s2s_options", {"eos": eos}, it) for it in items]
        start = model.config.decoder_start_token_id
        if start is None:
            start = self.pad_id

        def prepare(todo):
            enc = tok([p for p, _ in todo], add_special_tokens=True)["input_ids"]
            plans = [(list(e), _option_ids(tok, os_, eos)) for e, (_, os_) in zip(enc, todo)]
            return plans, [len(e) + sum(len(o) for o in os_) for e, os_ in plans]

        def compute(plans, budget):
            import torch
            from ..batching import pad
            dev = model.device
            ids, mask, _ = pad([e for e, _ in plans], self.pad_id, "right")
            ids, mask = ids.to(dev), mask.to(dev)
            enc_out = model.get_encoder()(input_ids=ids, attention_mask=mask)
            hidden = enc_out.last_hidden_state
            rows = [(b, j) for b, (_, os_) in enumerate(plans) for j in range(len(os_))]
            out = [[(0.0, 0)] * len(os_) for _, os_ in plans]      # an option without tokens stays (0.0, 0)
            self.stats["positions"] = self.stats.get("positions", 0) + ids.numel()
            width = max((len(plans[b][1][j]) for b, j in rows), default=1)
            step = max(1, budget // (ids.shape[1] + width))
            for a in range(0, len(rows), step):
                chunk_nonempty = [(b, j) for b, j in rows[a:a + step] if plans[b][1][j]]
                if not chunk_nonempty:
                    continue
                idx = torch.as_tensor([b for b, _ in chunk_nonempty], device=dev)
                targets = [plans[b][1][j] for b, j in chunk_nonempty]
                dec_in, dec_mask, _ = pad([[start] + t[:-1] for t in targets], self.pad_id, "right")
                logits = model(encoder_outputs=(hidden.index_select(0, idx),),
                               attention_mask=mask.index_select(0, idx), decoder_input_ids=dec_in.to(dev),
                               decoder_attention_mask=dec_mask.to(dev)).logits
                lp = torch.log_softmax(logits.float(), dim=-1)
                self.stats["positions"] = self.stats.get("positions", 0) + dec_in.numel()
                for r, ((b, j), t) in enumerate(zip(chunk_nonempty, targets)):
                    v = lp[r, torch.arange(len(t), device=dev),
                           torch.as_tensor(t, device=dev)].double().cpu().numpy()
                    out[b][j] = (float(np.sum(v)), len(t))
            return out

        values = sc._run("s2s_options", items, keys, prepare, compute, "option log-probabilities (seq2seq)")
        return [[tuple(v) for v in values[k]] for k in keys]

    def generate(self, sc, prompts, max_new_tokens, stop, do_sample, seed, temperature, chat):
        """Generation with ``model.generate``; seeded sampling seeds each batch (not each prompt) for seq2seq models."""
        rendered = self.render(prompts, chat)
        tok, model = self.tokenizer, self.model
        settings = {"max_new_tokens": max_new_tokens, "stop": stop, "do_sample": do_sample,
                    "seed": seed if do_sample else None, "temperature": temperature if do_sample else None}
        cacheable = not (do_sample and seed is None)
        keys = [sc.cache.key("s2s_generate", settings, r) if cacheable else f"nocache-{i}"
                for i, r in enumerate(rendered)]

        def prepare(todo):
            enc = tok(list(todo), add_special_tokens=True)["input_ids"]
            return [list(e) for e in enc], [len(e) + max_new_tokens for e in enc]

        def compute(batch, budget):
            import torch
            from ..batching import pad
            ids, mask, _ = pad(batch, self.pad_id, "right")
            if do_sample and seed is not None:
                torch.manual_seed(seed)
            kw = {"do_sample": do_sample, "max_new_tokens": max_new_tokens}
            if do_sample:
                kw["temperature"] = temperature
            out = model.generate(input_ids=ids.to(model.device), attention_mask=mask.to(model.device), **kw)
            return [truncate_at_stop(tok.decode(o, skip_special_tokens=True), stop) for o in out]

        values = sc._run("s2s_generate", rendered, keys, prepare, compute, "generation (seq2seq)", cache=cacheable)
        return [values[k] for k in keys]
