"""The transformers back end: the fallback and reference path, CPU or GPU.

Generation is batched with left padding, prompts sorted by length so a batch pads little,
results returned in input order. `classify` is one forward pass per batch: the next-token
distribution at the assistant's first position, restricted to the labels' first tokens and
renormalised. Qwen-VL models go through their processor, with images sized by qwen-vl-utils
where it imports (it needs torchvision) and always capped by the model's min/max pixels.
"""

from __future__ import annotations

import json
import math
from typing import Sequence

from gamut_local.config import JudgeSpec, ModelSpec, Sampling
from gamut_local.engines.base import FIRST_TOKEN, LABEL_SEQUENCE, Classification, Completion
from gamut_local.engines.labels import (
    LabelReadout,
    argmax,
    assistant_prefix,
    cached_readout,
    format_top,
    has_image,
    label_logprobs,
    normalise,
    reasoning_problem,
    text_only,
)
from gamut_local.engines.logs import current_log
from gamut_local.engines.reasoning import separate, thinking_for
from gamut_local.errors import InputError
from gamut_local.vocab import JUDGE_LABELS

DEFAULT_BATCH = 8  # rows per forward pass when the config leaves max_num_seqs unset


def _torch_dtype(name: str):
    import torch

    if name == "auto":
        return "auto"
    aliases = {"half": "float16", "float": "float32", "bf16": "bfloat16", "fp16": "float16"}
    return getattr(torch, aliases.get(name, name))


def _image_only_processor(path: str, tokenizer):
    """Qwen3-VL's processor without its video half.

    AutoProcessor builds a video processor that needs torchvision, which the CPU stack does
    not have; images need only the image processor and the tokenizer. The subclass declares
    just those two parts, so the processor machinery neither loads nor checks a video one.
    """
    from transformers import AutoImageProcessor
    from transformers.models.qwen3_vl import Qwen3VLProcessor

    class ImageOnlyQwen3VLProcessor(Qwen3VLProcessor):
        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
            super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)

    return ImageOnlyQwen3VLProcessor(image_processor=AutoImageProcessor.from_pretrained(path),
                                     tokenizer=tokenizer, chat_template=tokenizer.chat_template)


def _qwen_fetch_image():
    try:  # imports torchvision at module level; absent on the CPU stack
        from qwen_vl_utils import fetch_image
    except Exception:  # noqa: BLE001 - ImportError, or a broken CUDA torchvision's RuntimeError
        return None
    return fetch_image


class TransformersEngine:
    backend = "transformers"

    def __init__(self, spec: ModelSpec, path: str):
        import torch
        from transformers import (
            AutoConfig,
            AutoModelForCausalLM,
            AutoModelForImageTextToText,
            AutoProcessor,
            AutoTokenizer,
        )
        from transformers.utils import logging as transformers_logging

        if current_log() is not None:  # its weight-loading bar would draw over the stage's bars
            transformers_logging.disable_progress_bar()
        if spec.thinking_budget is not None:
            raise InputError([spec.problem("thinking_budget", "only the vLLM engine enforces a thinking "
                                           "budget (with reasoning_parser); use backend: vllm, or unset it")])
        self.name = spec.name
        self.spec = spec
        self.template_kwargs = dict(spec.chat_template_kwargs)
        self.batch_size = spec.engine.max_num_seqs or DEFAULT_BATCH
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        torch.manual_seed(spec.engine.seed)
        config = AutoConfig.from_pretrained(path)
        dtype = _torch_dtype(spec.engine.dtype)
        self.processor = None
        if getattr(config, "vision_config", None) is not None:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            try:
                self.processor = AutoProcessor.from_pretrained(path)
            except ImportError:
                self.processor = _image_only_processor(path, self.tokenizer)
            self.tokenizer = self.processor.tokenizer
            self.model = AutoModelForImageTextToText.from_pretrained(path, dtype=dtype)
            ip = self.processor.image_processor
            self.patch_size = getattr(ip, "patch_size", 14)
            size = dict(ip.size) if ip.size is not None else {}
            if spec.engine.min_pixels is not None:
                size["shortest_edge"] = spec.engine.min_pixels
            if spec.engine.max_pixels is not None:
                size["longest_edge"] = spec.engine.max_pixels
            self.image_size = size
            self._fetch_image = _qwen_fetch_image()
        else:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        self.model.to(self.device).eval()
        tok = self.tokenizer
        tok.padding_side = "left"
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        gen_eos = self.model.generation_config.eos_token_id
        gen_eos = gen_eos if isinstance(gen_eos, list) else [gen_eos]
        self.eos_ids = sorted({i for i in (*gen_eos, tok.eos_token_id) if i is not None})
        self._readouts: dict[tuple[str, ...], LabelReadout] = {}
        self.prefix = assistant_prefix(tok, self.template_kwargs)
        self.reasoning = reasoning_problem(spec, self.prefix)
        if self.reasoning is not None and isinstance(spec, JudgeSpec):
            raise InputError([self.reasoning])
        self.label_readout(JUDGE_LABELS)  # decided at start-up for the verdict labels
        self.thinking = thinking_for(tok, self.prefix)

    # -- inputs -------------------------------------------------------------------------------

    def _render(self, conversation: list[dict]) -> tuple[str, list]:
        """Chat-template text for one conversation, and its images in order."""
        if self.processor is None:
            if has_image(conversation):
                raise ValueError(f"model {self.name!r} takes text only, but a request has an image")
            text = self.tokenizer.apply_chat_template(text_only(conversation), add_generation_prompt=True,
                                                      tokenize=False, **self.template_kwargs)
            return text, []
        msgs, images = [], []
        for m in conversation:
            c = m.get("content")
            if isinstance(c, list):
                parts = []
                for p in c:
                    if p.get("type") == "image_pil":
                        images.append(self._size_image(p["image_pil"]))
                        parts.append({"type": "image"})
                    else:
                        parts.append(p)
                c = parts
            msgs.append({**m, "content": c})
        text = self.processor.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False,
                                                  **self.template_kwargs)
        return text, images

    def _size_image(self, image):
        if self._fetch_image is None:
            return image.convert("RGB")
        return self._fetch_image({"image": image, "min_pixels": self.image_size["shortest_edge"],
                                  "max_pixels": self.image_size["longest_edge"]},
                                 image_patch_size=self.patch_size)

    def _tensors(self, texts: list[str], images: list):
        if self.processor is None:
            enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        else:
            enc = self.processor(text=texts, images=images or None, return_tensors="pt",
                                 padding=True, images_kwargs={"size": self.image_size})
        return enc.to(self.device)

    def _batches(self, rendered: list[tuple[str, list]]):
        """Index batches, longest prompts first, so each batch pads to similar lengths.

        No progress bar of its own: callers (the stages) show one per chunk, and rich allows
        one live display at a time."""
        order = sorted(range(len(rendered)),
                       key=lambda i: (-len(rendered[i][1]), -len(rendered[i][0])))
        for s in range(0, len(order), self.batch_size):
            yield order[s:s + self.batch_size]

    # -- the interface ------------------------------------------------------------------------

    def chat(self, conversations: list[list[dict]], sampling: Sampling) -> list[Completion]:
        if not conversations:
            return []
        import torch

        rendered = [self._render(c) for c in conversations]
        out: list[Completion | None] = [None] * len(conversations)
        kwargs = dict(max_new_tokens=sampling.max_tokens, pad_token_id=self.tokenizer.pad_token_id,
                      eos_token_id=self.eos_ids)
        if sampling.temperature > 0:
            kwargs.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        torch.manual_seed(sampling.seed)
        for idx in self._batches(rendered):
            enc = self._tensors([rendered[i][0] for i in idx], [im for i in idx for im in rendered[i][1]])
            with torch.inference_mode():
                gen = self.model.generate(**enc, **kwargs, **self._json_constraint(sampling))
            new = gen[:, enc["input_ids"].shape[1]:].tolist()
            prompt_lens = enc["attention_mask"].sum(dim=1).tolist()
            for row, i in enumerate(idx):
                ids = new[row]
                stop = next((k for k, t in enumerate(ids) if t in self.eos_ids), None)
                body = ids if stop is None else ids[:stop]
                out[i] = Completion(
                    prompt_tokens=int(prompt_lens[row]),
                    completion_tokens=len(ids) if stop is None else stop + 1,
                    num_cached_tokens=None,
                    **separate(self.tokenizer.decode(body, skip_special_tokens=True), body,
                               "length" if stop is None else "stop", self.tokenizer, self.thinking,
                               sampling.max_tokens))
        return out  # type: ignore[return-value]

    def _json_constraint(self, sampling: Sampling) -> dict:
        """`generate` keywords that hold the output to `sampling.json_schema`: xgrammar's
        logits processor (the `transformers` extra installs it; vLLM depends on it too).
        Where it does not import the output is free and the caller validates it (`draft`
        re-asks with the errors)."""
        if sampling.json_schema is None:
            return {}
        try:
            import xgrammar as xgr
            from xgrammar.contrib.hf import LogitsProcessor
        except ImportError:
            return {}
        key = json.dumps(sampling.json_schema, sort_keys=True)
        cache = self.__dict__.setdefault("_grammars", {})
        if key not in cache:
            info = xgr.TokenizerInfo.from_huggingface(self.tokenizer,
                                                      vocab_size=self.model.config.get_text_config().vocab_size)
            cache[key] = xgr.GrammarCompiler(info).compile_json_schema(key, any_whitespace=False)
        return {"logits_processor": [LogitsProcessor(cache[key])]}  # one per generate call

    def label_readout(self, labels: Sequence[str]) -> LabelReadout:
        return cached_readout(self._readouts, self.tokenizer, labels, self.prefix)

    def classify(self, conversations: list[list[dict]], labels: Sequence[str]) -> list[Classification]:
        """Every conversation's label distribution; one read by first-token probabilities that
        could not be read (no finite probability) is re-scored once by whole-label likelihoods,
        and records that method and `attempts` 2."""
        if not conversations:
            return []
        if self.reasoning is not None:
            raise InputError([self.reasoning])
        readout = self.label_readout(labels)
        rendered = [self._render(c) for c in conversations]
        if readout.method != FIRST_TOKEN:
            return self._classify_sequences(rendered, readout)
        results = self._classify_first_token(rendered, readout)
        again = [i for i, r in enumerate(results) if r.label is None]
        if again:
            for i, r in zip(again, self._classify_sequences([rendered[i] for i in again], readout)):
                r.attempts = 2
                results[i] = r
        return results

    def _classify_first_token(self, rendered, readout: LabelReadout) -> list[Classification]:
        import torch

        ids = readout.all_token_ids()
        out: list[Classification | None] = [None] * len(rendered)
        for idx in self._batches(rendered):
            enc = self._tensors([rendered[i][0] for i in idx], [im for i in idx for im in rendered[i][1]])
            with torch.inference_mode():
                logits = self.model(**enc, logits_to_keep=1).logits[:, -1, :].float()
            logprobs = torch.log_softmax(logits, dim=-1)[:, torch.tensor(ids, device=logits.device)].tolist()
            prompt_lens = enc["attention_mask"].sum(dim=1).tolist()
            for row, i in enumerate(idx):
                probs = normalise(label_logprobs(readout, dict(zip(ids, logprobs[row]))))
                out[i] = Classification(probs=probs, label=argmax(probs, readout.labels),
                                        raw=format_top(probs), method=FIRST_TOKEN,
                                        prompt_tokens=int(prompt_lens[row]), num_cached_tokens=None)
        return out  # type: ignore[return-value]

    def _classify_sequences(self, rendered, readout: LabelReadout) -> list[Classification]:
        """Labels whose first tokens collide: score each label's whole token sequence
        (log P(label | prompt), teacher-forced), one forward pass per label and batch."""
        import torch

        out: list[Classification | None] = [None] * len(rendered)
        for idx in self._batches(rendered):
            texts = [rendered[i][0] for i in idx]
            images = [im for i in idx for im in rendered[i][1]]
            base = self._tensors(texts, images)["attention_mask"].sum(dim=1)
            scores = {}
            for label in readout.labels:
                enc = self._tensors([t + readout.lead + label for t in texts], images)
                n = (enc["attention_mask"].sum(dim=1) - base).tolist()  # label tokens per row
                width = max(n)
                with torch.inference_mode():
                    logits = self.model(**enc, logits_to_keep=width + 1).logits.float()
                lp = torch.log_softmax(logits[:, :-1, :], dim=-1)
                targets = enc["input_ids"][:, -width:]
                tok_lp = lp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (rows, width)
                scores[label] = [float(tok_lp[r, width - n[r]:].sum()) if n[r] > 0 else -math.inf
                                 for r in range(len(idx))]
            prompt_lens = base.tolist()
            for row, i in enumerate(idx):
                probs = normalise({lab: scores[lab][row] for lab in readout.labels})
                out[i] = Classification(probs=probs, label=argmax(probs, readout.labels),
                                        raw=" ".join(f"{lab}={p:.4f}" for lab, p in probs.items()),
                                        method=LABEL_SEQUENCE, prompt_tokens=int(prompt_lens[row]),
                                        num_cached_tokens=None)
        return out  # type: ignore[return-value]

    def close(self) -> None:
        import gc

        self.model = None
        gc.collect()
