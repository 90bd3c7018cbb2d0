"""A provider stream's deltas -> a job's events, every kind, and what its result needs.

Text goes out as ``chunk`` s, reasoning as ``reasoning``, and each tool call as one ``tool_call``
(its index, id and name), its argument pieces as ``tool_args``, and one ``tool_done`` holding
the whole call once the stream moved past it: when the next call starts, when the provider
gives its finish reason, or at the end (:meth:`DeltaWriter.finish`). The kinds
(:mod:`genq_contract.parts`) reach the emitter in the provider's order, which keeps it.

A provider that goes back to a call it left (pieces of index 0 after index 1 started) gets that
call's ``tool_done`` again at the end, with the whole arguments: readers take the last one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from genq_contract.parts import REASONING, TOOL_ARGS, TOOL_CALL, TOOL_DONE, ToolCall
from providers.litellm_adapter import Delta, ToolCallPiece
from workers.coalesce import JobEmitter


@dataclass
class _Call:
    index: int
    id: str
    name: str
    pieces: list[str] = field(default_factory=list)
    done: bool = False

    def whole(self) -> ToolCall:
        return ToolCall(id=self.id, name=self.name, arguments="".join(self.pieces))


class DeltaWriter:
    """Writes one attempt's deltas to its emitter; keeps its reasoning and tool calls."""

    def __init__(self, emitter: JobEmitter) -> None:
        self.emitter = emitter
        self._reasoning: list[str] = []
        self._calls: dict[int, _Call] = {}
        self._current: _Call | None = None

    @property
    def reasoning(self) -> str | None:
        return "".join(self._reasoning) if self._reasoning else None

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The calls in the order they started."""
        return [call.whole() for call in self._calls.values()]

    async def write(self, delta: Delta) -> None:
        """Writes a delta's reasoning, text and tool-call pieces (in that order)."""
        if delta.reasoning:
            self._reasoning.append(delta.reasoning)
            await self.emitter.write(delta.reasoning, REASONING)
        if delta.text:
            await self.emitter.write(delta.text)
        for piece in delta.tool_calls:
            await self._piece(piece)
        if delta.finish_reason is not None:
            await self.finish()

    async def finish(self) -> None:
        """Writes the ``tool_done`` of every call not done yet; safe to call again."""
        for call in self._calls.values():
            if not call.done:
                await self._done(call)
        self._current = None

    async def _piece(self, piece: ToolCallPiece) -> None:
        call = self._calls.get(piece.index)
        if call is None:
            if self._current is not None and not self._current.done:
                await self._done(self._current)
            call = _Call(piece.index, piece.id or "", piece.name or "")
            self._calls[piece.index] = call
            start = {"index": call.index, "id": call.id, "name": call.name}
            await self.emitter.write_event(TOOL_CALL, start)
        else:
            call.id = call.id or piece.id or ""
            call.name = call.name or piece.name or ""
            call.done = False  # the provider came back to it: done again at the end
        self._current = call
        if piece.arguments:
            call.pieces.append(piece.arguments)
            await self.emitter.write(piece.arguments, TOOL_ARGS, call.index)

    async def _done(self, call: _Call) -> None:
        call.done = True
        whole = call.whole()
        await self.emitter.write_event(TOOL_DONE, {"index": call.index, **whole.model_dump()})
