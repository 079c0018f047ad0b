"""The runtimes that can run the embedded GGUF model in-process, behind one small interface.

``cyllama`` installs from a prebuilt wheel in seconds and is the default. ``llama-cpp-python``
compiles from source for minutes; when it is installed anyway, ``MEMORYLAB_LOCAL_RUNTIME=llama-cpp-python``
picks it. A runtime has a ``name``, the model's ``chat_template`` with its ``bos`` and ``eos``
strings, ``count(text)`` (tokens, special tokens parsed), ``stream(prompt, settings)``, which
yields text pieces and returns the finish reason ("stop" or "length"), and ``forget_prefix()``. Both keep the prompt's
tokens in their KV cache and reuse the longest common prefix on the next call, so a repeated
system prompt is decoded once; callers serialize ``stream`` (one cache).

Weights go into plain CPU buffers, never ggml's repacked/AMX ones: some virtual machines (seen on
Firecracker) report AMX but fault on its first instruction, killing the process; a 135M model loses
nothing measurable.
"""
import importlib.util
import os
import random

ENV_VARIABLE = "MEMORYLAB_LOCAL_RUNTIME"
TOP_K, MIN_P, PENALTY_LAST_N, BATCH = 40, 0.05, 64, 512


def default_threads():
    """Half the cores for generation, every core for reading the prompt. On 2 idle cores two
    generation threads are faster (53 vs 32 tokens/s), but with one other busy process they fall to
    15 tokens/s while one thread keeps 33: the lab and its server run beside the model."""
    cores = os.cpu_count() or 1
    return max(1, cores // 2), cores


class CyllamaRuntime:
    name = "cyllama"
    module = "cyllama"

    def __init__(self, model_path, context_tokens):
        import cyllama.llama.llama_cpp as bindings

        self._bindings = bindings
        bindings.disable_logging()
        bindings.ggml_backend_load_all()
        model_params = bindings.LlamaModelParams()
        model_params.use_extra_bufts = False
        self._model = bindings.LlamaModel(str(model_path), model_params)
        self._vocab = self._model.get_vocab()
        context_params = bindings.LlamaContextParams()
        context_params.n_ctx = context_tokens
        context_params.n_batch = BATCH
        context_params.n_threads, context_params.n_threads_batch = default_threads()
        context_params.no_perf = True
        self._context = bindings.LlamaContext(self._model, context_params)
        self._cached = []
        self.chat_template = self._model.get_default_chat_template()
        self.bos = self._vocab.token_to_piece(self._vocab.token_bos(), special=True)
        self.eos = self._vocab.token_to_piece(self._vocab.token_eos(), special=True)
        self._add_bos = self._vocab.get_add_bos()

    def count(self, text):
        return len(self._vocab.tokenize(text, add_special=False, parse_special=True))

    def forget_prefix(self):
        """Empty the KV cache: the next prompt is decoded from its first token."""
        self._context.kv_cache_clear()
        self._cached = []

    def close(self):
        self._context.close()
        self._model.close()

    def _sampler(self, settings):
        sampler = self._bindings.LlamaSampler(self._bindings.LlamaSamplerChainParams())
        sampler.add_penalties(PENALTY_LAST_N, settings.get("repeat_penalty", 1.0),
                              settings.get("frequency_penalty") or 0.0, settings.get("presence_penalty") or 0.0)
        temperature = settings.get("temperature", 0.8)
        if temperature <= 0:
            sampler.add_greedy()
            return sampler
        sampler.add_top_k(TOP_K)
        sampler.add_top_p(settings.get("top_p") or 0.95, 1)
        sampler.add_min_p(MIN_P, 1)
        sampler.add_temp(temperature)
        seed = settings.get("seed")
        sampler.add_dist(seed if seed is not None else random.getrandbits(32))
        return sampler

    def _decode_prompt(self, tokens):
        """Decode what the cache does not hold yet; at least the last token, for its logits."""
        keep = 0
        for cached, new in zip(self._cached, tokens):
            if cached != new:
                break
            keep += 1
        keep = min(keep, len(tokens) - 1)
        self._context.memory_seq_rm(0, keep, -1)
        self._cached = tokens[:keep]
        for start in range(keep, len(tokens), BATCH):
            chunk = tokens[start:start + BATCH]
            self._context.decode(self._bindings.llama_batch_get_one(chunk, start))
            self._cached.extend(chunk)

    def stream(self, prompt, settings):
        tokens = self._vocab.tokenize(prompt, add_special=self._add_bos, parse_special=True)
        self._decode_prompt(tokens)
        sampler, stops = self._sampler(settings), [s for s in settings.get("stop") or () if s]
        generated, shown = [], 0
        for _ in range(settings.get("max_tokens", 256)):
            token = sampler.sample(self._context, -1)
            if self._vocab.is_eog(token):
                return "stop"
            generated.append(token)
            self._context.decode(self._bindings.llama_batch_get_one([token], len(self._cached)))
            self._cached.append(token)
            text = self._vocab.detokenize(generated, len(generated) * 16 + 16, unparse_special=True)
            if text.endswith("\ufffd"):
                continue  # the token ends inside a UTF-8 character: wait for the rest of it
            cut = _first_stop(text, stops, shown)
            if cut is not None:
                if cut > shown:
                    yield text[shown:cut]
                return "stop"
            safe = len(text) - _held_back(text, stops)
            if safe > shown:
                yield text[shown:safe]
                shown = safe
        text = self._vocab.detokenize(generated, len(generated) * 16 + 16, unparse_special=True)
        text = text.rstrip("\ufffd")  # max_tokens fell inside a character: drop its first bytes
        if len(text) > shown:
            yield text[shown:]
        return "length"


def _first_stop(text, stops, shown):
    """Where the earliest stop sequence begins in ``text`` (only where it could have just appeared)."""
    found = [text.find(stop, max(0, shown - len(stop))) for stop in stops]
    found = [at for at in found if at >= 0]
    return min(found) if found else None


def _held_back(text, stops):
    """How many characters at the end of ``text`` could still grow into a stop sequence."""
    held = 0
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), held, -1):
            if stop.startswith(text[-size:]):
                held = size
                break
    return held


class LlamaCppRuntime:
    name = "llama-cpp-python"
    module = "llama_cpp"

    def __init__(self, model_path, context_tokens):
        import llama_cpp.llama_cpp as bindings
        from llama_cpp import Llama

        defaults = bindings.llama_model_default_params

        def plain_buffers():
            params = defaults()
            params.use_extra_bufts = False
            return params

        bindings.llama_model_default_params = plain_buffers  # Llama() exposes no switch for it
        try:
            threads, batch_threads = default_threads()
            self._llama = Llama(model_path=str(model_path), n_ctx=context_tokens, n_threads=threads,
                                n_threads_batch=batch_threads, verbose=False)
        finally:
            bindings.llama_model_default_params = defaults
        self.chat_template = self._llama.metadata["tokenizer.chat_template"]
        self.bos = self._llama.detokenize([self._llama.token_bos()], special=True).decode("utf-8")
        self.eos = self._llama.detokenize([self._llama.token_eos()], special=True).decode("utf-8")

    def count(self, text):
        return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def forget_prefix(self):
        self._llama.reset()

    def close(self):
        self._llama.close()

    def stream(self, prompt, settings):
        finish_reason = "stop"
        arguments = {k: v for k, v in settings.items() if v is not None}
        for chunk in self._llama.create_completion(prompt, stream=True, **arguments):
            choice = chunk["choices"][0]
            if choice["text"]:
                yield choice["text"]
            finish_reason = choice.get("finish_reason") or finish_reason
        return finish_reason


RUNTIMES = {runtime.name: runtime for runtime in (CyllamaRuntime, LlamaCppRuntime)}


def installed():
    """The names of the runtimes installed here, the default first."""
    return [name for name, runtime in RUNTIMES.items() if importlib.util.find_spec(runtime.module)]


def chosen():
    """The runtime class to use: ``$MEMORYLAB_LOCAL_RUNTIME`` when set, else the first installed;
    None when none is. A name that is not a runtime, or not installed, raises ValueError."""
    wanted = os.environ.get(ENV_VARIABLE, "").strip()
    if wanted:
        if wanted not in RUNTIMES:
            raise ValueError(f"{ENV_VARIABLE}={wanted!r} is not a runtime; use one of {', '.join(RUNTIMES)}")
        if wanted not in installed():
            raise ValueError(f"{ENV_VARIABLE}={wanted} but {wanted} is not installed: pip install {wanted}")
        return RUNTIMES[wanted]
    names = installed()
    return RUNTIMES[names[0]] if names else None
