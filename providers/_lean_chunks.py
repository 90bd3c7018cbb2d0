"""Cheaper construction of, and attribute access to, the objects LiteLLM's stream wrapper
builds for every chunk.

For each chunk ``CustomStreamWrapper`` builds a ``ModelResponseStream`` holding a
``StreamingChoices`` holding a ``Delta`` (pydantic models with ``extra="allow"``), through their
constructors: pydantic validation, a fresh ``uuid4`` id that the wrapper overwrites at once
with the stream's id, a default ``Delta`` that the generic chunk path replaces, and the
deletion of unset fields. That is most of LiteLLM's per-chunk CPU.

The replacements here build the same objects by copying a pristine instance that LiteLLM's own
constructor made when the switch was turned on: the same field values, extras (in the same
order), set of fields set and private attributes. Each takes only the plain case (the
arguments listed in its docstring, on the exact LiteLLM class) and hands anything else to
LiteLLM's code. ``tests/providers/test_lean_chunks.py`` compares both ways field by field.

Reading and writing these objects' extras (``choice.delta``, ``delta.content``) goes through
pydantic's generic ``__getattr__`` / ``__setattr__``, which look the name up on the class
and, for a missing one such as a chunk's ``usage``, raise and catch two exceptions first.
:class:`ExtrasFirst` answers those names from the extras dict, as pydantic would.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper
from litellm.types.utils import Delta, ModelResponseStream, StreamingChoices
from pydantic import BaseModel

_object_setattr = object.__setattr__
_IMMUTABLE = (type(None), str, int, float, bool)


@dataclass(frozen=True)
class _Pristine:
    """The four slots of a pydantic model as LiteLLM's constructor left them."""

    fields: dict[str, Any]
    extra: dict[str, Any]
    fields_set: frozenset[str]
    private: dict[str, Any] | None
    fresh_private: tuple[str, ...]  # private values that are {}: a new one per copy

    @classmethod
    def of(cls, model: Any, nested: frozenset[str] = frozenset()) -> _Pristine:
        """Snapshots ``model``; every value but those named in ``nested`` (rebuilt per copy)
        and empty private dicts must be immutable, or a copy would share it."""
        private = model.__pydantic_private__
        if model.__pydantic_extra__ is None:
            raise TypeError(f"{type(model).__name__} takes no extras")
        fresh = tuple(k for k, v in (private or {}).items() if type(v) is dict and not v)
        for values in (model.__dict__, model.__pydantic_extra__, private):
            for name, value in (values or {}).items():
                if name not in nested and name not in fresh and not isinstance(value, _IMMUTABLE):
                    raise TypeError(f"{type(model).__name__}.{name} is not immutable")
        return cls(
            dict(model.__dict__),
            dict(model.__pydantic_extra__),
            frozenset(model.__pydantic_fields_set__),
            None if private is None else dict(private),
            fresh,
        )

    def fill(self, target: Any) -> dict[str, Any]:
        """Gives ``target`` (allocated, not initialised) its own copy of the four slots;
        returns its extras."""
        private = None if self.private is None else self.private.copy()
        if private is not None:
            for name in self.fresh_private:
                private[name] = {}
        extra = self.extra.copy()
        _object_setattr(target, "__dict__", self.fields.copy())
        _object_setattr(target, "__pydantic_extra__", extra)
        _object_setattr(target, "__pydantic_fields_set__", set(self.fields_set))
        _object_setattr(target, "__pydantic_private__", private)
        return extra


@dataclass(frozen=True)
class LeanChunks:
    """The replacement methods, bound to pristine instances and LiteLLM's originals."""

    delta: _Pristine
    choices: _Pristine
    response: _Pristine
    delta_init: Callable[..., None]
    choices_init: Callable[..., None]
    model_response_creator: Callable[..., ModelResponseStream]

    @classmethod
    def build(cls) -> LeanChunks:
        """Snapshots what the pinned LiteLLM's constructors make (LiteLLM's own code must be in
        place: call before turning the replacements on)."""
        return cls(
            delta=_Pristine.of(Delta()),
            choices=_Pristine.of(StreamingChoices(), frozenset({"delta"})),
            response=_Pristine.of(ModelResponseStream(model="m"), frozenset({"choices"})),
            delta_init=Delta.__init__,
            choices_init=StreamingChoices.__init__,
            model_response_creator=CustomStreamWrapper.model_response_creator,
        )

    def replacements(self) -> list[tuple[type, str, Callable[..., Any]]]:
        """(class, method name, replacement) for each method this module replaces."""
        return [
            (Delta, "__init__", self._delta_init()),
            (StreamingChoices, "__init__", self._choices_init()),
            (CustomStreamWrapper, "model_response_creator", self._model_response_creator()),
            *ExtrasFirst.on(Delta, _DELTA_EXTRAS, absent=_DELTA_UNSET).replacements(),
            *ExtrasFirst.on(StreamingChoices, _CHOICE_EXTRAS).replacements(),
            *ExtrasFirst.on(ModelResponseStream, (), absent=("usage",)).replacements(),
        ]

    def _delta_init(self) -> Callable[..., None]:
        pristine, original = self.delta, self.delta_init

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            """``Delta(content=..., role=...)`` (either or none): a copy of ``Delta()`` with
            those two extras set, as LiteLLM's constructor stores them (unvalidated)."""
            if args or type(self) is not Delta or not kwargs.keys() <= {"content", "role"}:
                original(self, *args, **kwargs)
                return
            extra = pristine.fill(self)
            extra["content"] = kwargs.get("content")
            extra["role"] = kwargs.get("role")

        return __init__

    def _choices_init(self) -> Callable[..., None]:
        pristine, original = self.choices, self.choices_init

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            """``StreamingChoices()`` or ``StreamingChoices(delta=<a Delta or None>)``: a copy of
            ``StreamingChoices()`` holding that delta (or a new ``Delta()``)."""
            delta = kwargs.get("delta")
            if (
                args
                or type(self) is not StreamingChoices
                or not kwargs.keys() <= {"delta"}
                or not (delta is None or isinstance(delta, Delta))
            ):
                original(self, *args, **kwargs)
                return
            pristine.fill(self)["delta"] = Delta() if delta is None else delta

        return __init__

    def _model_response_creator(self) -> Callable[..., ModelResponseStream]:
        pristine, original = self.response, self.model_response_creator

        def model_response_creator(
            self: Any,
            chunk: dict[str, Any] | None = None,
            hidden_params: Mapping[str, object] | None = None,
            delta: Delta | None = None,
        ) -> ModelResponseStream:
            """Replaces ``CustomStreamWrapper.model_response_creator`` (run on every chunk).

            Once the stream's first chunk has fixed its id and ``created`` (which LiteLLM's
            method then writes over every new chunk's), a chunk's response is a copy of a
            pristine ``ModelResponseStream`` with those, the model, the fingerprint and the
            hidden params set as LiteLLM's method sets them: no validation and no ``uuid4``
            per chunk. The first chunk, a ``chunk`` dict to rebuild (usage chunks) and
            Ollama's id rewriting go through LiteLLM's method."""
            model = self._served_openrouter_model() or self._cached_model_name
            if (
                chunk is not None
                or self.response_id is None
                or self.created is None
                or self._ollama_response_ids.response_id is not None
                or not (model is None or type(model) is str)
            ):
                return original(self, chunk, hidden_params, delta)
            response = ModelResponseStream.__new__(ModelResponseStream)
            pristine.fill(response)
            fields = response.__dict__
            fields["id"] = self.response_id
            fields["created"] = self.created
            fields["model"] = model
            fields["choices"] = [StreamingChoices(delta=delta)]
            if self.system_fingerprint is not None:
                fields["system_fingerprint"] = self.system_fingerprint
                response.__pydantic_fields_set__.add("system_fingerprint")
            response.__pydantic_private__["_hidden_params"] = {  # type: ignore[index]
                **(hidden_params or {}),
                "custom_llm_provider": self._cached_logging_llm_provider,
                "created_at": time.time(),
                **self._base_hidden_params,
            }
            return response

        return model_response_creator


_DELTA_EXTRAS = ("content", "role", "function_call", "tool_calls", "audio", "images", "annotations")
_DELTA_UNSET = ("reasoning_content", "thinking_blocks", "reasoning_items")
"""Declared fields a ``Delta`` drops when unset (OpenAI's shape): reading one is a miss."""
_CHOICE_EXTRAS = ("finish_reason", "index", "delta", "logprobs", "enhancements")
_extra_slot = BaseModel.__dict__["__pydantic_extra__"]


@dataclass(frozen=True)
class ExtrasFirst:
    """``__getattr__`` and ``__setattr__`` for one LiteLLM model class whose per-chunk
    attributes are pydantic extras, doing what pydantic's own do, minus the detours.

    - Reading: pydantic's ``__getattr__`` (reached once normal lookup failed) returns a
      private attribute, else the extra of that name, else looks the name up on the class and
      raises ``AttributeError``. This returns the extra at once (for any name that is not a
      private attribute), and raises at once for the names in ``absent``: names the class
      (checked when the switch is built) does not have, such as a chunk's ``usage``.
    - Writing one of ``extras`` (checked: no field, class attribute or private attribute of
      that name; extras allowed; not frozen; no assignment validation) stores it in the extras
      and marks it set, which is what pydantic does for a name it does not know.

    Anything else, and any subclass, goes through pydantic's methods."""

    model: type[BaseModel]
    extras: frozenset[str]
    absent: frozenset[str]
    private: frozenset[str]
    inherited_getattr: Callable[[Any, str], Any]  # pydantic's, as the class had it
    inherited_setattr: Callable[[Any, str, Any], None]

    @classmethod
    def on(
        cls, model: type[BaseModel], extras: tuple[str, ...], absent: tuple[str, ...] = ()
    ) -> ExtrasFirst:
        config = model.model_config
        if (
            config.get("extra") != "allow"
            or config.get("frozen")
            or config.get("validate_assignment")
        ):
            raise TypeError(f"{model.__name__}: extras are not plain attributes")
        for name in (*extras, *absent):
            if hasattr(model, name) or name.startswith("_") or name in model.__class_vars__:
                raise TypeError(f"{model.__name__}.{name} is a class attribute")
        if set(extras) & set(model.__pydantic_fields__):
            raise TypeError(f"{model.__name__}: {extras} holds a declared field")
        return cls(
            model,
            frozenset(extras),
            frozenset(absent),
            frozenset(model.__private_attributes__),
            model.__getattr__,  # type: ignore[attr-defined]
            model.__setattr__,
        )

    def replacements(self) -> list[tuple[type, str, Callable[..., Any]]]:
        return [
            (self.model, "__getattr__", self._getattr()),
            (self.model, "__setattr__", self._setattr()),
        ]

    def _getattr(self) -> Callable[[Any, str], Any]:
        model, absent, private = self.model, self.absent, self.private
        inherited = self.inherited_getattr

        def __getattr__(self: Any, item: str) -> Any:
            if item not in private:
                try:
                    extra = _extra_slot.__get__(self)
                except AttributeError:  # not initialised yet
                    extra = None
                if extra and item in extra:
                    return extra[item]
                if item in absent and type(self) is model:
                    raise AttributeError(
                        f"{type(self).__name__!r} object has no attribute {item!r}"
                    )
            return inherited(self, item)

        return __getattr__

    def _setattr(self) -> Callable[[Any, str, Any], None]:
        model, extras, inherited = self.model, self.extras, self.inherited_setattr

        def __setattr__(self: Any, name: str, value: Any) -> None:
            if name in extras and type(self) is model:
                extra = self.__pydantic_extra__
                if extra is not None:
                    extra[name] = value
                    self.__pydantic_fields_set__.add(name)
                    return
            inherited(self, name, value)

        return __setattr__
