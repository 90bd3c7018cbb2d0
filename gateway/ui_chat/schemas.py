"""The body of ``POST /v1/ui/chat``: what the AI SDK's ``DefaultChatTransport`` sends (``id``,
``messages``, ``trigger``, ``messageId``) and what an app puts in the transport's ``body``
(``model``, ``system``, ``tools``, ``tool_choice``, ``params``, ``metadata``). Also the
OpenAPI schema.

Limits: a chat id is 1-128 characters of ``A-Z a-z 0-9 _ -`` (it is a path segment and part of
a Redis key), a message id 1-128 printable ASCII characters; at most :data:`MAX_MESSAGES`
messages of at most :data:`MAX_PARTS` parts each; the whole body at most the gateway's
``GENQ_MAX_BODY_BYTES``, its images in ``data:`` URLs at most ``GENQ_MAX_IMAGE_BYTES``. A
field the route does not know is refused by name (422), not ignored.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

CHAT_ID_PATTERN = r"^[A-Za-z0-9_-]{1,128}$"
MESSAGE_ID_PATTERN = r"^[\x21-\x7e]{1,128}$"
MAX_MESSAGES = 1000
MAX_PARTS = 100

Trigger = Literal["submit-message", "regenerate-message"]


class UIMessage(BaseModel):
    """One of the chat's messages as ``useChat`` holds it; its parts are read by
    :mod:`gateway.ui_chat.chat_messages` (which names the part it refuses)."""

    model_config = ConfigDict(extra="ignore")  # the AI SDK's own additions change nothing here

    id: str = Field(pattern=MESSAGE_ID_PATTERN)
    role: Literal["system", "user", "assistant"]
    metadata: Any = Field(default=None, description="The app's; not sent to the model")
    parts: list[dict[str, Any]] = Field(max_length=MAX_PARTS)


class UIChatRequest(BaseModel):
    """A message sent (``submit-message``) or an answer asked again (``regenerate-message``)."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        json_schema_extra={
            "examples": [
                {
                    "id": "chat-1",
                    "messages": [
                        {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}
                    ],
                    "trigger": "submit-message",
                    "model": "demo/fast",
                }
            ]
        },
    )

    id: str = Field(pattern=CHAT_ID_PATTERN, description="The chat's id (useChat's `id`)")
    messages: list[UIMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    trigger: Trigger = "submit-message"
    message_id: str | None = Field(
        default=None,
        alias="messageId",
        pattern=MESSAGE_ID_PATTERN,
        description="With regenerate-message: the assistant message asked again",
    )
    model: str = Field(min_length=1, max_length=200, description="One of GET /v1/models")
    system: str | None = Field(default=None, min_length=1, description="Sent first, as system")
    tools: list[dict[str, Any]] | None = Field(
        default=None,
        description="Function tools in OpenAI's Chat format: "
        "`{type: function, function: {name, description, parameters}}`",
    )
    tool_choice: str | dict[str, Any] | None = Field(
        default=None, description="none, auto, required or `{type: function, function: {name}}`"
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        max_length=32,
        description="Generation params, as POST /v1/generations takes them (temperature, "
        "max_tokens, ...); tools go in `tools`",
    )
    metadata: dict[str, str | int | float | bool | None] = Field(
        default_factory=dict, max_length=16, description="Kept with the generation, as is"
    )

    @property
    def continues(self) -> str | None:
        """The id of the assistant message a sent message continues (it carries a tool's
        output back), which the answer's parts extend; None when the answer is a new message."""
        last = self.messages[-1]
        if self.trigger == "submit-message" and last.role == "assistant":
            return last.id
        return None


class StopResult(BaseModel):
    generationId: str = Field(description="The generation stopped (an id of /v1/generations)")
    cancelled: bool = Field(description="True: it will not produce a result")
    status: str = Field(description="Its status once its worker let go (normally cancelled)")
