"""Model providers: one small httpx client per wire format, no vendor SDK.

- :class:`OpenAIProvider`: OpenAI-compatible Chat Completions (OpenAI, Ollama's ``/v1``, vLLM,
  DeepSeek, Zhipu GLM's compatible endpoint...).
- :class:`AnthropicProvider`: Anthropic Messages.

Ollama is reached through its OpenAI-compatible ``/v1`` endpoint (:func:`make_provider` with
``"ollama"``), which has what the loop uses: tools and streamed tool calls, images, usage and
stop sequences. Its native ``/api/chat`` would add model options such as ``num_ctx`` (the
context window), which the compatible endpoint cannot set per request; set it on the Ollama side
instead (``OLLAMA_CONTEXT_LENGTH``, or ``PARAMETER num_ctx`` in a Modelfile).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from .anthropic import AnthropicProvider
from .base import (
    Chunk,
    ChunkCallback,
    HttpProvider,
    Provider,
    TextChunk,
    ToolCallChunk,
    retry_after,
)
from .openai import OpenAIProvider

__all__ = [
    "OLLAMA_BASE_URL",
    "PROVIDER_KINDS",
    "AnthropicProvider",
    "Chunk",
    "ChunkCallback",
    "HttpProvider",
    "OpenAIProvider",
    "Provider",
    "ProviderKind",
    "TextChunk",
    "ToolCallChunk",
    "make_provider",
    "retry_after",
]

ProviderKind = Literal["openai", "anthropic", "ollama"]
PROVIDER_KINDS: Final = ("openai", "anthropic", "ollama")
#: Ollama's OpenAI-compatible endpoint on this machine
OLLAMA_BASE_URL: Final = "http://127.0.0.1:11434/v1"


def make_provider(
    kind: str, model: str, *, base_url: str | None = None, api_key_env: str | None = None, **options: Any
) -> HttpProvider:
    """The provider of ``kind`` (``openai``, ``anthropic`` or ``ollama``) for ``model``.

    ``api_key_env`` names the variable the key is read from (each format has its default;
    ``ollama`` needs none). The other options are those of the provider's class.

    Raises:
        ValueError: an unknown kind, or a bad option.
        PresetError: the provider needs a key and its variable is not set.
    """
    if kind == "openai":
        return OpenAIProvider(model, base_url=base_url, **_key(api_key_env), **options)
    if kind == "anthropic":
        return AnthropicProvider(model, base_url=base_url, **_key(api_key_env), **options)
    if kind == "ollama":
        return OpenAIProvider(model, base_url=base_url or OLLAMA_BASE_URL, api_key_env=api_key_env or "", **options)
    raise ValueError(f"provider must be one of {', '.join(PROVIDER_KINDS)}, not {kind!r}")


def _key(api_key_env: str | None) -> dict[str, Any]:
    return {} if api_key_env is None else {"api_key_env": api_key_env}
