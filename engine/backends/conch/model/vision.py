"""Vision-language models on the flattened runner: the language model runs as any Llama-family model
(llama.py), and the image embeddings stand in for the input embeddings at the image placeholder tokens.

vision_families.py's registry by `model_type` (Llava-1.5, Gemma 3) gives each family's placeholder and how its
tower and projector run. `VisionTower` runs them (the model's own HF modules) as a step of the engine thread,
batched over every image a step's prefill chunks reach that it has not encoded yet, and keeps each image's
embeddings by content hash (LRU): a screenshot resent each turn is encoded once. `VisionPrompt` is one
sequence's images: where each one's run of placeholder tokens starts, its pixels, and the ids the KV caches key
the prompt by (each placeholder replaced by a negative id derived from its image's digest: two prompts that
differ only in their images share no KV).
A family whose image tokens attend to each other both ways (Gemma 3) gets each image token's attention reach
(`Step.sees`: its image's last position) and prefill chunks that never end inside an image.

Shapes: pixels (3, S, S) per image; embeddings (N, hidden) per image, N = `tokens_per_image`.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

import torch

from conch.engine.backends.conch.model.quantized import embedding_rows
from conch.engine.backends.conch.model.step import Step
from conch.engine.backends.conch.model.vision_families import FAMILIES
from conch.engine.errors import InvalidRequest
from conch.engine.images import ImageInput

CACHED_IMAGES = 64            # images whose embeddings are kept (Llava-1.5-7B: 576 x 4096 bf16, 4.5 MiB each)


class TextView:
    """The language model of a vision-language model, as the flattened forward reads a causal LM (`config`,
    `model.embed_tokens/layers/norm/rotary_emb`, `lm_head`), and callable on ids (prompt logprobs)."""

    def __init__(self, vlm: Any) -> None:
        self.config = vlm.config.text_config
        self.model = vlm.model.language_model
        self.lm_head = vlm.lm_head
        self.generation_config = getattr(vlm, "generation_config", None)

    def __call__(self, input_ids: torch.Tensor, **kwargs: Any) -> Any:
        kwargs.pop("use_cache", None)
        hidden = self.model(input_ids=input_ids, use_cache=False).last_hidden_state
        return SimpleNamespace(logits=self.lm_head(hidden))


@dataclass(frozen=True)
class VisionPrompt:
    """One sequence's images, in prompt order: run i holds `images[i]`'s embeddings at positions
    `starts[i]`..`starts[i]` + N - 1."""

    starts: tuple[int, ...]
    images: tuple[ImageInput, ...]
    pixels: tuple[torch.Tensor, ...]
    key_ids: tuple[int, ...]      # the prompt's ids for the KV caches' keys (placeholders keyed by digest)
    length: int = 1               # N: each image's tokens
    whole: bool = False           # an image is computed in one chunk (its tokens attend both ways)

    def chunk(self, start: int, n: int) -> int:
        """Prompt tokens a chunk from `start` computes: `n`, or, for `whole` images, up to the end of the
        image it would end inside (a step's token budget is a bound the scheduler may pass by N - 1)."""
        end = start + n
        if self.whole:
            for first in self.starts:
                if first < end < first + self.length:
                    return first + self.length - start
        return n


class VisionTower:
    """Not thread-safe: `encode`/`splice` on the engine thread; `prompt` anywhere (it reads the processor)."""

    def __init__(self, vlm: Any, processor: Any, tokenizer: Any) -> None:
        self.config, self.family = vlm.config, FAMILIES[vlm.config.model_type]
        self.vlm = vlm                          # its whole HF forward: prompt logprobs with images (scorer)
        self.model = vlm.model                  # the tower and the projector (its get_image_features)
        self.processor = processor
        self.spec = self.family.spec(vlm.config, tokenizer)
        self.token_id, self.tokens_per_image = self.spec.token_id, self.spec.tokens_per_image
        self.dtype = embedding_rows(vlm.model.language_model.embed_tokens)[1]   # (a GGUF's may be quantized)
        self.cache: OrderedDict[str, torch.Tensor] = OrderedDict()   # digest -> (N, hidden)
        self.calls = 0                          # tower forwards run (each a batch of images)
        self.encoded = 0                        # images those forwards encoded

    def prompt(self, ids: list[int], images: tuple[ImageInput, ...]) -> VisionPrompt:
        """The sequence's images, each preprocessed by the model's own image processor. InvalidRequest for an
        image that does not decode, or runs that do not match the images (the tokenize step expanded them)."""
        n = self.tokens_per_image
        starts = _runs(ids, self.token_id, n)
        if len(starts) != len(images) or any(ids[s:s + n] != [self.token_id] * n for s in starts):
            raise InvalidRequest(f"the prompt's image placeholders do not match its {len(images)} image(s)")
        keys = list(ids)
        for start, image in zip(starts, images, strict=True):
            base = int(image.digest[:12], 16) * n     # under 2**58: the stores key by int64
            keys[start:start + n] = [-1 - base - k for k in range(n)]
        return VisionPrompt(starts, images, tuple(self._pixels(image) for image in images), tuple(keys), n,
                            self.family.bidirectional)

    def _pixels(self, image: ImageInput) -> torch.Tensor:
        return self.processor(images=[image.rgb()], return_tensors="pt")["pixel_values"][0]

    @torch.inference_mode()
    def encode(self, pixels: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Each image's embeddings (digest -> pixels in, digest -> (N, hidden) out); those not cached yet
        computed in one tower forward."""
        found = {d: self.cache[d] for d in pixels if d in self.cache}
        for digest in found:
            self.cache.move_to_end(digest)
        missing = [d for d in pixels if d not in found]
        if not missing:
            return found
        batch = torch.stack([pixels[d] for d in missing]).to(self.dtype)              # (B, 3, S, S)
        features = self.family.features(self.model, self.config, batch)          # B x (N, hidden)
        self.calls += 1
        self.encoded += len(missing)
        for digest, rows in zip(missing, features, strict=True):
            found[digest] = self.cache[digest] = rows.reshape(self.tokens_per_image, -1)
            if len(self.cache) > CACHED_IMAGES:
                self.cache.popitem(last=False)
        return found

    def splice(self, step: Step, seqs: list[Any], spans: list[tuple[int, int]]) -> Step:
        """`step` with the embeddings of every image token its spans compute (`Step.embeds_at`/`embeds`), and
        for a family whose image tokens attend both ways each one's reach (`Step.sees`)."""
        reached: list[tuple[int, str, int, int]] = []          # (flat index, digest, first row, rows)
        pixels: dict[str, torch.Tensor] = {}
        for seq, (start, n), span in zip(seqs, spans, step.spans, strict=True):
            prompt: VisionPrompt | None = seq.vision
            if prompt is None:
                continue
            for first, image, px in zip(prompt.starts, prompt.images, prompt.pixels, strict=True):
                lo, hi = max(start, first), min(start + n, first + self.tokens_per_image)
                if lo < hi:
                    reached.append((span.offset + lo - start, image.digest, lo - first, hi - lo))
                    pixels[image.digest] = px
        if not reached:
            return step
        embeddings = self.encode(pixels)
        at = torch.cat([torch.arange(i, i + k) for i, _, _, k in reached])
        rows = torch.cat([embeddings[d][r:r + k] for _, d, r, k in reached])
        return replace(step, embeds_at=at, embeds=rows, sees=self._sees(step, reached))

    def scorer(self, prompt: VisionPrompt) -> Any:
        """The model as prompt_logprobs calls it (input_ids -> .logits), with `prompt`'s images in place: the
        HF forward of the whole model (for Gemma 3 its image tokens' both-ways mask, token_type_ids)."""

        @torch.inference_mode()
        def forward(input_ids: torch.Tensor, **_: Any) -> Any:
            kwargs = {"token_type_ids": (input_ids == self.token_id).long()} if self.family.bidirectional else {}
            pixels = torch.stack(prompt.pixels).to(self.dtype)
            return self.vlm(input_ids=input_ids, pixel_values=pixels, use_cache=False, **kwargs)

        return forward

    def _sees(self, step: Step, reached: list[tuple[int, str, int, int]]) -> torch.Tensor | None:
        """(T,) each token's last position attended to: an image token's, its image's last (both ways)."""
        if not self.family.bidirectional:
            return None
        sees = step.positions.clone()
        for i, _, r, k in reached:
            sees[i:i + k] = step.positions[i] - r + self.tokens_per_image - 1
        return sees


def _runs(ids: list[int], token: int, n: int) -> tuple[int, ...]:
    """Where each run of n placeholders starts (images side by side make one longer run)."""
    starts, i = [], 0
    while i < len(ids):
        if ids[i] == token:
            starts.append(i)
            i += n
        else:
            i += 1
    return tuple(starts)
