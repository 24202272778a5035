"""The own engine's asyncio side: it loads the model on an engine thread, turns each request into
sequences and commands (commands.py) for that thread's core (engine_core.py: the step loop and its failure
policy), and hands each request its deltas back on the event loop.

Threads: the asyncio loop only enqueues commands and reads per-request queues; the engine thread owns the
scheduler, runner and sampler. torch releases the GIL in its kernels, so the server stays responsive.

Every torch call of the model runs on the engine thread: loading, steps and prompt logprobs. OpenMP (libgomp)
keeps a team of workers per thread that runs parallel regions, and once the process holds more of those
workers than cores it stops spinning between regions; each of a step's parallel regions then waits on a
futex wake-up. So the load runs on the first engine thread, and an engine thread with no work parks
(core/engine_core.py; engine/torch_threads.py for the other backends' torch work).
"""
from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import replace
from typing import TYPE_CHECKING, Any, AsyncIterator

import torch

from conch.engine import torch_threads
from conch.engine.backend import BackendStats, Capabilities
from conch.engine.backends.conch.model import families
from conch.engine.backends.conch import loader
from conch.engine.backends.conch.core.commands import Abort, Add, Call
from conch.engine.backends.conch.core.engine_core import MAX_FAILED_STEPS, EngineCore, settle
from conch.engine.backends.conch.runners.flat_runner import FlatRunner
from conch.engine.backends.conch.model.matmul_path import cpu_flags
from conch.engine.backends.conch.model.vision import TextView, VisionTower
from conch.engine.backends.conch.kv.slot_store import StorePolicy
from conch.engine.backends.conch.kv.prefix_cache import PrefixCache
from conch.engine.backends.conch.core.prompt_logprobs import prompt_deltas, prompt_logprobs
from conch.engine.backends.conch.runners.runner import Runner
from conch.engine.backends.conch.core.sampler import Sampler
from conch.engine.backends.conch.core.scheduler import Scheduler
from conch.engine.backends.conch.core.reasoning_gate import ReasoningGate
from conch.engine.backends.conch.core.sequence import Sequence
from conch.engine.backends.conch.speculation import Speculation
from conch.engine.errors import BackendUnavailable, InvalidRequest
from conch.engine.params.model_defaults import GenerationDefaults
from conch.engine.pipeline.length_bound import max_token_span
from conch.engine.repository.config import ModelConfig
from conch.engine.types import GenerationDelta, GenerationRequest

if TYPE_CHECKING:
    from conch.grammars import GrammarCompiler

log = logging.getLogger(__name__)
__all__ = ["MAX_FAILED_STEPS", "ConchBackend"]


class ConchBackend:
    capabilities = Capabilities(grammar=True, logprobs=True, n=True, seed=True, prompt_logprobs=True,
                                speculation=True)

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.context_length = config.context_length
        self.tokenizer: Any = None       # a transformers tokenizer once started
        # the core calls _deliver through this lambda, so a test may wrap the method after start
        self.core = EngineCore(config.name, lambda deltas: self._deliver(deltas))
        self.generation_defaults = GenerationDefaults()   # the model's own, once started (HasGenerationDefaults)
        self._queues: dict[str, asyncio.Queue] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._grammars: GrammarCompiler | None = None     # built on the first constrained request
        self._tower: VisionTower | None = None             # a vision-language model's (model/vision.py), once started

    # -- the engine thread's state, read from the event loop (plain reads: see stats; counters: core.steps...)
    @property
    def runner(self) -> Runner:
        return self.core.runner

    @property
    def scheduler(self) -> Scheduler:
        return self.core.scheduler

    # -- lifecycle -------------------------------------------------------------------------------------
    async def start(self) -> None:
        self._loop = self.core.loop = asyncio.get_running_loop()
        loaded: asyncio.Future = self._loop.create_future()
        self.core.launch(lambda: self._loaded(loaded))
        await loaded                                              # the engine thread's load, or its error
        await asyncio.to_thread(max_token_span, self.tokenizer)    # the prompt length bound's one vocabulary pass

    def _loaded(self, loaded: asyncio.Future) -> bool:
        """On the first engine thread: load the model (see the module's note on threads); whether it loaded."""
        assert self._loop is not None
        try:
            self._load()
        except BaseException as exc:                             # start() re-raises it on the loop
            self._loop.call_soon_threadsafe(settle, loaded, exc)
            return False
        self._loop.call_soon_threadsafe(settle, loaded, None)
        return True

    def _load(self) -> None:
        loaded = loader.load(self.config)
        model, self.tokenizer, self.generation_defaults = loaded.model, loaded.tokenizer, loaded.defaults
        tower = None
        if loaded.processor is not None:                 # a vision-language model: its language model runs here
            tower = VisionTower(model, loaded.processor, self.tokenizer)
            model = TextView(model)
            if self.config.runner != "auto" or not isinstance(families.family(model.config), families.Family):
                raise BackendUnavailable(f"model '{self.config.name}': a vision-language model runs on the "
                                         f"flattened runner only (runner: auto, a Llama-family language model)")
        self.context_length = min(self.config.context_length, model.config.max_position_embeddings)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        runner = self.core.runner = self._runner(model, pad)
        if tower is not None:
            self._see(runner, tower)
        c = self.config
        if isinstance(runner, FlatRunner):
            self._fit_context(runner.kv.bytes_per_token, runner.forward_pass.max_positions)
        speculation = Speculation(c.speculative_tokens, c.prompt_lookup_min, c.prompt_lookup_max,
                                  c.speculative_grammar, c.speculative_max_batch)
        self.core.scheduler = Scheduler(runner, c.max_batch_size, c.max_step_tokens, c.prefill_stall, speculation)
        self.core.sampler = Sampler(self.tokenizer, model.config.vocab_size)
        self._eos = frozenset(_eos_ids(model, self.tokenizer))

    def _see(self, runner: Runner, tower: VisionTower) -> None:
        """Images in: the flattened runner splices the tower's embeddings at their placeholders."""
        assert isinstance(runner, FlatRunner)
        runner.vision = self._tower = tower
        self.capabilities = replace(self.capabilities, vision=tower.spec)
        log.info("model %s: vision, %d tokens an image", self.config.name, tower.tokens_per_image)

    def _fit_context(self, bytes_per_token: int, positions: int) -> None:
        """A context no longer than the flattened forward's RoPE table (Phi-3 longrope: its original length) and
        one sequence's KV within kv_cache_mb (a model's own context, served by path, may be 128K tokens: vLLM
        refuses such a start, Conch serves the length that fits and says so)."""
        if self.context_length > positions:
            log.warning("model %s: serving %d tokens of context (the rotary table's length), not %d",
                        self.config.name, positions, self.context_length)
            self.context_length = positions
        fits = self.config.kv_cache_mb * 2**20 // bytes_per_token
        if self.context_length > fits:
            log.warning("model %s: context length %d does not fit kv_cache_mb %d (%d bytes a token); serving %d "
                        "tokens (raise kv_cache_mb for more)", self.config.name, self.context_length,
                        self.config.kv_cache_mb, bytes_per_token, fits)
            self.context_length = fits

    def _runner(self, model, pad: int) -> Runner:
        """The flattened runner for the Llama family (chunked prefill, slot KV store under a byte budget);
        the HF forward, left-padded, for any other architecture or when the config says `runner: hf`."""
        c = self.config
        prefixes = PrefixCache(c.prefix_cache_mb * 2**20)
        fam = families.family(model.config)
        if c.runner == "auto" and isinstance(fam, families.Family):
            policy = None if c.kv_store == "auto" else StorePolicy(c.kv_store)
            runner = FlatRunner(model, c.max_batch_size, c.kv_cache_mb * 2**20, prefixes, policy, c.batch_invariant)
            log.info("model %s: the flattened runner, its KV store %s", c.name, runner.kv.policy.value)
            log.info("model %s: kernel path: %s (CPU flags: %s)", c.name, runner.forward_pass.kernels.matmul.name,
                     " ".join(cpu_flags()) or "unknown")
            return runner
        if c.runner == "auto":
            log.warning("model %s: served by the HF runner, several times slower than the flattened one: %s",
                        c.name, fam)
        else:
            log.info("model %s: the HF runner (runner: hf)", c.name)
        if c.batch_invariant:
            log.warning("model %s: batch_invariant holds for the flattened runner only, not the HF runner", c.name)
        from conch.engine.backends.conch.runners.hf_runner import HFRunner   # transformers' modeling: its user only

        return HFRunner(model, pad, prefixes, c.max_batch_size * self.context_length)

    async def stop(self) -> None:
        self.core.stop()
        if self.core.thread is not None:
            await asyncio.to_thread(self.core.thread.join, 10)

    def health(self) -> bool:
        return self.core.serving

    def stats(self) -> BackendStats:
        """Read from the event loop while the engine thread runs: plain reads of lists and counters.

        KV usage: the runner's (`Runner.kv_usage`): the flattened runner's bytes reserved over `kv_cache_mb`,
        the HF runner's tokens held over `max_batch_size x context_length`."""
        running = list(self.scheduler.running)          # a snapshot: the engine thread rebinds the list
        prefixes = self.runner.prefixes
        return BackendStats(
            running=sum(not seq.status.is_finished for seq in running), waiting=self.scheduler.num_waiting,
            kv_cache_usage=self.runner.kv_usage, prefix_cache_queries=prefixes.queried_tokens,
            prefix_cache_hits=prefixes.hit_tokens, spec_proposed_tokens=self.scheduler.proposed_tokens,
            spec_accepted_tokens=self.scheduler.accepted_tokens)

    # -- requests --------------------------------------------------------------------------------------
    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationDelta]:
        prompt_ids = list(request.prompt_token_ids or ())
        vision = None
        if request.images:                             # decoded and preprocessed off the engine thread
            vision = await torch_threads.run(self._vision_prompt, prompt_ids, request.images)
        if request.params.prompt_logprobs is not None:     # with the images in place (VisionTower.scorer)
            scorer = self.runner.model if vision is None or self._tower is None else self._tower.scorer(vision)
            scored = await self._on_engine_thread(prompt_logprobs, scorer, self.tokenizer, prompt_ids,
                                                  request.params.prompt_logprobs)
            for delta in prompt_deltas(request, scored):
                yield delta
            if request.params.max_tokens == 0:     # scoring only: nothing to generate
                return
        compiled = await self._compile(request.grammar) if request.grammar is not None else None
        seqs = [self._sequence(request, i, prompt_ids, compiled) for i in range(request.params.n)]
        for seq in seqs:
            seq.vision = vision
        out: asyncio.Queue = asyncio.Queue()
        self._queues[request.id] = out
        self.core.send(Add(tuple(seqs)))
        remaining = len(seqs)
        try:
            while remaining:
                delta = await out.get()
                remaining -= delta.finished
                yield delta
        finally:
            self._queues.pop(request.id, None)
            if remaining:                       # the consumer went away: free the batch slots
                self.core.send(Abort(request.id))

    async def abort(self, request_id: str, index: int | None = None) -> None:
        self.core.send(Abort(request_id, index))

    def _vision_prompt(self, prompt_ids: list[int], images):
        if self._tower is None:
            raise InvalidRequest(f"model '{self.config.name}' has no vision: it takes text only, not images")
        return self._tower.prompt(prompt_ids, images)

    def _sequence(self, request: GenerationRequest, index: int, prompt_ids: list[int], compiled) -> Sequence:
        p = request.params
        # seed in [-2**63, 2**64) (engine/params/table.py); mod 2**64 is torch's own mapping of a negative seed
        gen = torch.Generator().manual_seed((p.seed + index) % 2**64 if p.seed is not None else secrets.randbits(63))
        return Sequence(
            request=request, index=index, prompt_ids=prompt_ids,
            eos_ids=self._eos | frozenset(p.stop_token_ids),
            max_total=self.context_length, generator=gen,
            matcher=_matcher(request, compiled),
        )

    async def _compile(self, spec):
        if self._grammars is None:
            from conch.grammars import GrammarCompiler, TokenizerInfo

            self._grammars = GrammarCompiler(TokenizerInfo.from_hf(self.tokenizer), bounds=self.config.grammar_bounds)
        return await self._grammars.compile_async(spec)

    async def _on_engine_thread(self, fn, *args):
        """fn(*args) run by the engine thread between two steps; its result or error, awaited here."""
        assert self._loop is not None
        done: asyncio.Future = self._loop.create_future()
        self.core.send(Call(fn, args, done))
        return await done

    def _deliver(self, deltas: list[GenerationDelta]) -> None:
        """On the event loop: each delta to its request's queue (a request that has gone has none)."""
        for delta in deltas:
            out = self._queues.get(delta.request_id)
            if out is not None:
                out.put_nowait(delta)


def _eos_ids(model, tokenizer) -> set[int]:
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    gen = getattr(model, "generation_config", None)
    extra = getattr(gen, "eos_token_id", None) if gen is not None else None
    ids |= set(extra if isinstance(extra, list) else [extra] if extra is not None else [])
    return ids


def _matcher(request: GenerationRequest, compiled):
    """The sequence's matcher: the grammar's, behind a ReasoningGate for a reasoning request; None if neither."""
    inner = compiled.matcher() if compiled is not None else None
    return ReasoningGate(request.reasoning, inner) if request.reasoning is not None else inner
