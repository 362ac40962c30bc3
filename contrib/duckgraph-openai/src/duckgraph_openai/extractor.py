"""Graph extraction and community reports over an OpenAI-compatible /v1/chat/completions with JSON-schema
structured output. The instructions, validation and retries come from duckgraph.ports' ChatExtractor."""

from __future__ import annotations

from duckgraph.ports import ChatExtractor, ExtractionError, ReplyFormat

from duckgraph_openai.client import DEFAULT_API_KEY_ENV, DEFAULT_BASE_URL, OpenAIClient, check_options

DEFAULT_CHAT_MODEL = "gpt-4o-mini"


class OpenAIExtractor(ChatExtractor):
    """Asks a chat model for the graph of a text (or a community's report); an invalid answer is sent back with
    what is wrong, up to `max_attempts` times. The answer is checked here too, with the core's limits: a server
    may ignore response_format."""

    def __init__(
        self,
        model: str = DEFAULT_CHAT_MODEL,
        *,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = 300.0,
        max_attempts: int = 3,
        temperature: float = 0.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        api_key_env: str = DEFAULT_API_KEY_ENV,
    ) -> None:
        check_options("extractor 'openai'", model=model, base_url=base_url, timeout=timeout,
                      max_attempts=max_attempts, temperature=temperature, max_retries=max_retries, backoff=backoff,
                      api_key_env=api_key_env)
        super().__init__(model, max_attempts=max_attempts)
        self.temperature = temperature
        self._client = OpenAIClient(base_url, timeout=timeout, max_retries=max_retries, backoff=backoff,
                                    api_key_env=api_key_env, error=ExtractionError,
                                    rate_limit_advice="or raise max_retries or backoff")

    @property
    def id(self) -> str:
        return f"openai:{self.model}"

    def check(self) -> str | None:
        listed = self._client.get("/models").get("data")
        served = [str(m.get("id")) for m in listed if isinstance(m, dict)] if isinstance(listed, list) else []
        # Ollama lists a model by its full name and answers to it without the default tag too: qwen3 is qwen3:latest.
        untagged = ":" not in self.model.rsplit("/", 1)[-1]
        if self.model in served or (untagged and f"{self.model}:latest" in served):
            return None
        names = ", ".join(served[:10]) or "none"
        # Not listed is not proof: llama-server lists the .gguf path it loaded and answers any model name. A chat
        # call of one token tells: a model error (HTTP 404) is a failure, an answer only a warning.
        try:
            self._client.post("/chat/completions", {
                "model": self.model, "messages": [{"role": "user", "content": "Reply with OK."}], "max_tokens": 1,
                "temperature": 0, "stream": False})
        except ExtractionError as exc:
            if getattr(exc, "status", None) == 404:  # the server's "no such model"
                raise ExtractionError(f"{self._client.shown_url} does not serve the model {self.model!r}: set the "
                                      f"model option to one it serves (it lists {names}). {exc}") from None
            raise ExtractionError(f"{self._client.shown_url}/models does not list the model {self.model!r} (it "
                                  f"lists {names}), and a chat call with it failed: {exc}") from None
        return (f"{self._client.shown_url}/models lists {names}, not {self.model!r}, though a chat call with "
                f"{self.model!r} was answered: the server may answer another name (llama-server does); if extraction "
                "fails, set the model option to one of those it lists")

    def complete(self, messages: list[dict[str, str]], reply: ReplyFormat) -> str:
        # Strict mode: the server's decoder keeps the model to the schema (where it supports it).
        answer = self._client.post("/chat/completions", {
            "model": self.model, "messages": messages, "temperature": self.temperature, "stream": False,
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": reply.name, "strict": True, "schema": reply.strict_schema()}},
        })
        try:
            message = answer["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise ExtractionError(f"{self._client.shown_url}/chat/completions sent no choices[0].message: is it an "
                                  "OpenAI-compatible API?") from None
        if message.get("refusal"):
            raise ExtractionError(f"{self.model} refused the {reply.what}: {str(message['refusal'])[:300]}")
        return str(message.get("content") or "")
