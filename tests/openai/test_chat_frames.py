"""A chat stream's text chunks, made from one template per stream, against the chunk's dict
and JSON made for each (:func:`gateway.openai.chat.frame` of ``chat_chunk``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway.openai.chat import TextFrames, frame
from gateway.openai.objects import chat_chunk
from genq import Job, JobStatus


def job_of(job_id: str, model: object, created_at: float) -> Job:
    return Job(
        id=job_id,
        status=JobStatus.ACTIVE,
        payload={"model": model, "messages": []},
        result=None,
        attempt=1,
        max_attempts=3,
        progress=None,
        error=None,
        priority=0,
        created_at=created_at,
        updated_at=created_at,
        started_at=None,
        finished_at=None,
        run_at=None,
        idempotency_key=None,
        cancel_requested=False,
        dead_reason=None,
    )


@given(
    text=st.text(),
    job_id=st.text(min_size=1, max_size=40),
    model=st.one_of(st.text(max_size=40), st.none()),
    created_at=st.floats(min_value=0, max_value=4e9),
    entry_id=st.sampled_from(["1733550000000-0", "1733550000000-17", ""]),
    include_usage=st.booleans(),
)
def test_a_text_chunk_is_the_frame_of_its_chunk(
    text: str,
    job_id: str,
    model: object,
    created_at: float,
    entry_id: str,
    include_usage: bool,
) -> None:
    job = job_of(job_id, model, created_at)
    usage = {"usage": None} if include_usage else {}
    made = TextFrames(job, **usage).frame(text, entry_id)
    assert made == frame(chat_chunk(job, {"content": text}, **usage), entry_id)


def test_a_job_whose_fields_hold_the_mark_gets_whole_frames() -> None:
    """The template's mark as one of the job's own fields (a model named so): each frame is
    made whole, the same bytes."""
    job = job_of("j1", "\x00genq text\x00", 1733550000.5)
    frames = TextFrames(job)
    assert frames.frame("hi", "1-0") == frame(chat_chunk(job, {"content": "hi"}), "1-0")
    assert not frames._before  # made whole, not from the template
