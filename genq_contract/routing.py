"""Which models may run, which provider serves each, and which queue carries its jobs.

The gateway imports this module to validate a request and pick the queue to enqueue on, so it
must stay light: it never imports LiteLLM, directly or indirectly (a test checks).

A model is named as LiteLLM names it, ``<provider>/<model>`` (``demo/fast``,
``openai/gpt-4o-mini``). Its provider is the part before the first ``/`` unless the
configuration routes it elsewhere (two accounts of one vendor can be two providers). Each
provider has its own queue, ``<namespace>:<provider>``; every queue is its own Redis Cluster hash
tag, so providers spread over slots and a provider's cooldown pauses only its own queue.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Self

from pydantic import field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from . import chat

DEFAULT_MODELS = ("openai/gpt-4o-mini",)
"""The allow-list in production: no demo models, whose only use is trying genq out."""
DEV_MODELS = ("demo/fast", "demo/slow", *DEFAULT_MODELS)
"""The allow-list in dev mode (``GENQ_DEV=1``: ``genq dev``, ``make dev``)."""
DEFAULT_CONCURRENCY = 8
DEFAULT_NAMESPACE = "gen"
MAX_FALLBACKS = 3
"""The longest list of fallback models one request may give."""

OPENAI_PARAMS = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "user",
        *chat.PARAMS,
    }
)
"""Generation params passed on to any provider (the single-choice subset; tools, structured
output and reasoning effort as :mod:`genq_contract.chat` checks them)."""

DEMO_PARAMS = frozenset(
    {
        "demo_tokens",
        "demo_delay_ms",
        "demo_fault",
        "demo_fault_attempts",
        "demo_retry_after",
        "demo_after",
        "demo_attempt",
    }
)
"""Extra params the built-in demo provider understands (see ``providers.demo``)."""


class RoutingError(ValueError):
    """Root of the routing errors: a request the gateway should answer with a 4xx."""


class ModelNotAllowedError(RoutingError):
    """The model is not on the configured allow-list."""

    def __init__(self, model: str, allowed: Iterable[str]) -> None:
        self.model = model
        self.allowed = sorted(allowed)
        super().__init__(f"model {model!r} is not available; choose one of {self.allowed}")


class InvalidParamError(RoutingError):
    """A param the provider takes, with a value that does not fit (``field`` names it)."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


class FallbackError(RoutingError):
    """A list of fallback models that cannot be followed."""


class UnsupportedParamError(RoutingError):
    """A generation param this provider does not accept."""

    def __init__(self, names: Iterable[str], provider: str) -> None:
        self.names = sorted(names)
        super().__init__(f"unsupported params for provider {provider!r}: {self.names}")


@dataclass(frozen=True)
class ProviderConfig:
    """One provider: its queue, its concurrency per worker process and how to reach it."""

    name: str
    queue_prefix: str
    concurrency: int = DEFAULT_CONCURRENCY
    api_base: str | None = None
    api_key_env: str | None = None
    """Name of the environment variable holding the key (the key itself never sits in config)."""


@dataclass(frozen=True)
class Routing:
    """The allow-list of models and the providers serving them."""

    models: Mapping[str, str]
    """Allowed model (or ``<provider>/*`` pattern) -> provider name."""
    providers: Mapping[str, ProviderConfig]
    namespace: str = DEFAULT_NAMESPACE
    fallbacks: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Model -> the models that continue its generations when it fails (``GENQ_FALLBACKS``)."""
    _patterns: tuple[tuple[str, str], ...] = field(default=(), init=False, repr=False)

    def __post_init__(self) -> None:
        patterns = tuple((m[:-1], p) for m, p in self.models.items() if m.endswith("/*"))
        object.__setattr__(self, "_patterns", patterns)

    @classmethod
    def build(
        cls,
        models: Iterable[str] = DEFAULT_MODELS,
        *,
        model_providers: Mapping[str, str] | None = None,
        concurrency: Mapping[str, int] | None = None,
        default_concurrency: int = DEFAULT_CONCURRENCY,
        api_bases: Mapping[str, str] | None = None,
        api_key_envs: Mapping[str, str] | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        fallbacks: Mapping[str, Iterable[str]] | None = None,
    ) -> Routing:
        """Builds the routing from plain configuration values (see :class:`RoutingSettings`)."""
        model_providers = model_providers or {}
        concurrency = concurrency or {}
        api_bases = api_bases or {}
        api_key_envs = api_key_envs or {}
        if not namespace or any(c in namespace for c in "{}"):
            raise ValueError(f"invalid queue namespace {namespace!r}")
        routes: dict[str, str] = {}
        for model in models:
            model = model.strip()
            if not model:
                continue
            if "/" not in model:
                raise ValueError(f"model {model!r} must be named <provider>/<model>")
            routes[model] = model_providers.get(model) or model.split("/", 1)[0]
        providers = {}
        for name in sorted(set(routes.values())):
            limit = int(concurrency.get(name, default_concurrency))
            if limit < 1:
                raise ValueError(f"concurrency of provider {name!r} must be >= 1")
            providers[name] = ProviderConfig(
                name=name,
                queue_prefix=f"{namespace}:{name}",
                concurrency=limit,
                api_base=api_bases.get(name),
                api_key_env=api_key_envs.get(name),
            )
        chains = {model: tuple(chain) for model, chain in (fallbacks or {}).items()}
        routing = cls(routes, providers, namespace, chains)
        for model, chain in chains.items():
            try:
                routing.provider_of(model)
                routing.check_fallbacks(model, chain)
            except RoutingError as exc:
                raise ValueError(f"GENQ_FALLBACKS of {model!r}: {exc}") from None
        return routing

    @property
    def allowed_models(self) -> list[str]:
        return sorted(self.models)

    def provider_of(self, model: str) -> ProviderConfig:
        """The provider serving ``model``; :class:`ModelNotAllowedError` if it is not allowed."""
        name = self.models.get(model)
        if name is None:
            name = next((p for stem, p in self._patterns if _matches(model, stem)), None)
        if name is None:
            raise ModelNotAllowedError(model, self.models)
        return self.providers[name]

    def queue_prefix(self, model: str) -> str:
        """The queue prefix a generation for ``model`` is enqueued on."""
        return self.provider_of(model).queue_prefix

    def check_params(self, model: str, params: Mapping[str, Any]) -> None:
        """Raises :class:`UnsupportedParamError` for params the model's provider won't take,
        :class:`InvalidParamError` for a value that does not fit (``tools`` and the like)."""
        allowed = OPENAI_PARAMS | (DEMO_PARAMS if litellm_provider(model) == "demo" else set())
        unknown = set(params) - allowed
        if unknown:
            raise UnsupportedParamError(unknown, self.provider_of(model).name)
        try:
            chat.check_params(params)
        except chat.ChatFormatError as exc:
            raise InvalidParamError(exc.field, str(exc)) from None

    def fallbacks_of(self, model: str, requested: Iterable[str] | None = None) -> tuple[str, ...]:
        """The models that continue a generation of ``model`` when it fails, in order: the
        request's own list when it gave one (an empty list: none), else ``GENQ_FALLBACKS``."""
        if requested is not None:
            return tuple(requested)
        return self.fallbacks.get(model, ())

    def check_fallbacks(
        self, model: str, fallbacks: Iterable[str], params: Mapping[str, Any] | None = None
    ) -> None:
        """Raises a :class:`RoutingError` unless every fallback is an allowed model, other
        than ``model`` and named once, whose provider accepts ``params``."""
        chain = list(fallbacks)
        if model in chain or len(set(chain)) < len(chain):
            raise FallbackError("fallback models must differ from the model and from each other")
        for fallback in chain:
            self.provider_of(fallback)
            self.check_params(fallback, params or {})


def litellm_provider(model: str) -> str:
    """The LiteLLM provider prefix of a model name (``openai/gpt-4o`` -> ``openai``)."""
    return model.split("/", 1)[0]


def new_job_id(provider: str) -> str:
    """A new generation id, ``<provider>.<32 hex>``: whoever holds it finds its queue."""
    return f"{provider}.{uuid.uuid4().hex}"


def _matches(model: str, stem: str) -> bool:
    rest = model[len(stem) :]
    return model.startswith(stem) and bool(rest) and "{" not in rest and "}" not in rest


def split_list(value: Any) -> Any:
    """A setting given as a JSON list or as a comma-separated string."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


def split_mapping(value: Any) -> Any:
    """Accepts a JSON object or ``a=1,b=2`` (the easy form in a shell or compose file)."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            return json.loads(text)
        pairs = (part.split("=", 1) for part in text.split(",") if part.strip())
        return {k.strip(): v.strip() for k, v in pairs}
    return value


class RoutingSettings(BaseSettings):
    """The routing part of a process's settings (``GENQ_`` environment variables).

    The gateway's and the worker's ``Settings`` both inherit it, so they can never disagree on
    which queue a model's jobs go to. Lists take ``a,b`` or JSON; mappings ``a=1,b=2`` or JSON.
    """

    model_config = SettingsConfigDict(env_prefix="GENQ_", extra="ignore")

    dev: bool = False
    """GENQ_DEV: dev mode; among other things the demo models join the default allow-list."""
    models: Annotated[list[str], NoDecode] = list(DEFAULT_MODELS)
    """GENQ_MODELS: the allow-list; ``<provider>/*`` allows every model of a provider.
    Default: :data:`DEFAULT_MODELS`, or :data:`DEV_MODELS` in dev mode."""
    model_providers: Annotated[dict[str, str], NoDecode] = {}
    """GENQ_MODEL_PROVIDERS: model -> provider, where it is not the part before ``/``."""
    provider_concurrency: Annotated[dict[str, int], NoDecode] = {}
    """GENQ_PROVIDER_CONCURRENCY: provider -> concurrent generations per worker process."""
    default_concurrency: int = DEFAULT_CONCURRENCY
    provider_api_bases: Annotated[dict[str, str], NoDecode] = {}
    """GENQ_PROVIDER_API_BASES: provider -> base URL (an OpenAI-compatible server, a proxy)."""
    provider_api_key_envs: Annotated[dict[str, str], NoDecode] = {}
    """GENQ_PROVIDER_API_KEY_ENVS: provider -> name of the env var holding its API key."""
    queue_namespace: str = DEFAULT_NAMESPACE
    """GENQ_QUEUE_NAMESPACE: provider queues are ``<namespace>:<provider>``."""
    fallbacks: dict[str, list[str]] = {}
    """GENQ_FALLBACKS: ``{"model": ["fallback", ...]}`` (JSON): where a generation continues
    when its model fails in a way retrying it will not fix soon (``workers.fallback``); a
    request's own ``fallbacks`` list replaces its model's. Every model must be allowed."""

    @field_validator("models", mode="before")
    @classmethod
    def _parse_list(cls, value: Any) -> Any:
        return split_list(value)

    @field_validator(
        "model_providers",
        "provider_concurrency",
        "provider_api_bases",
        "provider_api_key_envs",
        mode="before",
    )
    @classmethod
    def _parse_mapping(cls, value: Any) -> Any:
        return split_mapping(value)

    @model_validator(mode="after")
    def _dev_models(self) -> Self:
        if self.dev and "models" not in self.model_fields_set:
            self.models = list(DEV_MODELS)
        return self

    def routing(self) -> Routing:
        return Routing.build(
            self.models,
            model_providers=self.model_providers,
            concurrency=self.provider_concurrency,
            default_concurrency=self.default_concurrency,
            api_bases=self.provider_api_bases,
            api_key_envs=self.provider_api_key_envs,
            namespace=self.queue_namespace,
            fallbacks=self.fallbacks,
        )
