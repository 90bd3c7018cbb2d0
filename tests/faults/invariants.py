"""The invariants every fault test ends with, checked against what is really in Redis.

``await check_invariants(queue, accepted, views=...)`` fails with a precise message unless:

1. **No accepted job lost**: every id the producer was told about has a record (and, with
   ``settled=True``, a terminal status).
2. **At most one settle per job**: a job's stream holds at most one terminal event, and a
   finished job exactly one, as its last entry, of the record's status; a completed record's
   result is that event's data. Every viewer saw at most one terminal event, as its last.
3. **Never two live leases**: an ``active`` job is in the lease set with a token, and a job is
   in at most one of ready / scheduled / leases / dead, the one its status says.
4. **No write from a stale lease accepted**: between two ``restarted`` markers every chunk has
   one writer (``writer_of``), consecutive attempts have different writers, and the chunks after
   the last marker come from the attempt whose result was stored (``result_writer``).
5. **No duplicate text after ``restarted``**: what each viewer shows (chunks appended, cleared on
   ``restarted``) is the result's text exactly, and its event ids strictly increase.
6. **No orphan keys after retention**: every per-job key (record, stream, idempotency key) of a
   finished job carries a TTL no longer than its retention; a stream or key without a record
   expires too; the ready/scheduled/lease/rank sets name only live jobs in the matching state;
   an idempotency key points at the job that holds it. With ``retention`` (seconds) the check
   also waits that long for the finished jobs' keys to vanish and then finds none.
7. **Fair-share books balance**: the ready set is exactly the union of the tenants' ready sets
   (each job in its own tenant's); a tenant takes turns or is parked, not both, exactly when it
   has runnable jobs; each tenant's running count is the number of its jobs in the lease set.
8. **The job index agrees with the records**: each job is listed under its record's status (an
   active one as waiting), for the queue and for its tenant, and nowhere else; an entry without
   a record is one whose record expired and that waits in the expiry set for the next pick to
   drop it.
9. **Usage counted once**: while every job of the queue still has its record, the queue's
   usage counters (all time, the days' journals folded in first) hold exactly the sum of the
   records' usage, and one ``attempts`` per metered attempt in the records' histories: no
   settle counted twice, none missed. An attempt lost with its worker (``lease_expired``) is
   in that sum once metered (``Queue.meter_lost``), and until then filed in the lost-attempts
   hash: each one is either metered or filed, never both, never neither (a filed attempt no
   record lists, of a job deleted or whose custom id was enqueued again, is dropped unmetered
   by the next meter).
10. **Every hold is a lease**: the holders hash and the holds set name the same (job, worker)
    pairs, and each of those jobs is in the lease set: a lease that ended left no hold behind
    for presence.lua to expire.
11. **The intake names only jobs waiting to be admitted**: each entry is a waiting job, once,
    with its record's creation time, tenant and rank, and in no set yet. The check then admits
    them (``Queue.admit``, as the next pick would), so the checks above see every waiting job
    where it will be served.
12. **The waits name the ready set's jobs**: the waits (what the oldest wait is read from)
    hold exactly the ready set's jobs, each since a time no later than now: a job that left
    the line left no entry behind to age.
13. **Every hand-off is a running job's**: each entry of the hand-offs list names an active
    job held by the entry's token, in the lease set and filed under the entry's holder, with
    the record as it is now (nothing changed it since the enqueue started it); each offer is
    well formed (holder, token, lease ms, cap), at most one per holder.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from genq import TERMINAL_EVENTS, Event, Queue, visible_text

TERMINAL_STATUSES = frozenset(TERMINAL_EVENTS)
LIVE_SETS = ("ready", "scheduled", "leases", "dead")


def tag(data: Any) -> str:
    """The writer of a tagged chunk: ``"A#2:tok3 "`` -> ``"A#2"`` (``"A:tok3 "`` -> ``"A"``)."""
    return str(data).split(":", 1)[0]


def result_writer(result: Any) -> str:
    """The writer a tagged result names (this module's handlers, or worker_process.py's)."""
    if "writer" in result:
        return str(result["writer"])
    return str(result["worker"])


def default_text(result: Any) -> str:
    """The text a result stands for: itself if a string, else its ``text`` field."""
    if isinstance(result, str):
        return result
    if isinstance(result, Mapping) and isinstance(result.get("text"), str):
        return result["text"]
    raise AssertionError(f"cannot tell the text of result {result!r}")


def segments(events: Sequence[Event]) -> list[list[Event]]:
    """The chunks of each attempt a viewer saw: split at every ``restarted``."""
    parts: list[list[Event]] = [[]]
    for event in events:
        if event.type == "restarted":
            parts.append([])
        elif event.type == "chunk":
            parts[-1].append(event)
    return parts


def _order(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _tail(key: str) -> str:
    return key.split(":", 2)[2]


def _s(value: bytes | str | None) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


@dataclass
class Audit:
    """What the check looked at, for a test that wants to assert more."""

    records: dict[str, dict[str, str]] = field(default_factory=dict)
    streams: dict[str, list[Event]] = field(default_factory=dict)
    statuses: dict[str, str] = field(default_factory=dict)

    def count(self, status: str) -> int:
        return sum(1 for s in self.statuses.values() if s == status)


class InvariantError(AssertionError):
    pass


async def check_invariants(
    queue: Queue,
    accepted: Iterable[str],
    *,
    views: Mapping[str, Iterable[Sequence[Event]]] | None = None,
    settled: bool = True,
    text_of: Callable[[Any], str] = default_text,
    writer_of: Callable[[Any], Hashable] | None = None,
    result_writer: Callable[[Any], Hashable] | None = None,
    retention: float | None = None,
) -> Audit:
    """Checks the invariants (module docstring) for ``accepted`` job ids of ``queue``."""
    ids = list(dict.fromkeys(accepted))
    problems: list[str] = []
    audit = Audit()
    redis, k = queue.redis, queue.keys

    async with redis.pipeline(transaction=False) as pipe:
        for job_id in ids:
            pipe.hgetall(k.job(job_id))
            pipe.xrange(k.events(job_id))
        replies = await pipe.execute()
    for i, job_id in enumerate(ids):
        raw, entries = replies[2 * i], replies[2 * i + 1]
        record = {_s(a): _s(b) for a, b in raw.items()}
        if not record:
            problems.append(f"accepted job {job_id} lost: no record")
            continue
        audit.records[job_id] = record
        status = record["status"]
        audit.statuses[job_id] = status
        events = [_decode(queue, e_id, fields) for e_id, fields in entries]
        audit.streams[job_id] = events
        if settled and status not in TERMINAL_STATUSES:
            problems.append(f"job {job_id} not settled: {status}")
        problems += _check_stream(job_id, record, events, entries)
        if writer_of is not None:
            problems += _check_writers(job_id, record, events, queue, writer_of, result_writer)
        for view in (views or {}).get(job_id, ()):
            problems += _check_view(job_id, record, list(view), queue, text_of)

    problems += await check_intake(queue)
    problems += await _check_sets(queue, audit)
    problems += await check_fair_share(queue)
    problems += await check_waits(queue)
    problems += await check_index(queue)
    problems += await check_usage(queue)
    problems += await check_holds(queue)
    problems += await check_hand_offs(queue)
    problems += await _check_keys(queue, audit)
    if retention is not None and not problems:
        problems += await _check_retention(queue, audit, retention)
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise InvariantError(f"{len(problems)} invariant violation(s):\n  {shown}{more}")
    return audit


def _decode(queue: Queue, entry_id: Any, fields: Mapping[Any, Any]) -> Event:
    from genq import decode_entry

    return decode_entry(entry_id, fields, queue.result_codec)


def _check_stream(
    job_id: str, record: dict[str, str], events: list[Event], raw: list[Any]
) -> list[str]:
    problems = []
    status = record["status"]
    terminal = [e for e in events if e.terminal]
    if len(terminal) > 1:
        problems.append(f"job {job_id} settled {len(terminal)} times: {[e.type for e in terminal]}")
    if status in TERMINAL_STATUSES:
        if not terminal:
            problems.append(f"job {job_id} is {status} but its stream has no terminal event")
        elif events[-1] is not terminal[-1] or terminal[-1].type != status:
            problems.append(
                f"job {job_id} is {status}; stream ends {[e.type for e in events[-3:]]}"
            )
        if status == "completed" and terminal:
            last_data = _s(raw[-1][1][b"data"])
            if record.get("result") != last_data:
                problems.append(f"job {job_id}: stored result differs from its completed event")
    elif terminal:
        problems.append(f"job {job_id} is {status} yet its stream has {terminal[-1].type}")
    ids = [_order(e.id) for e in events]
    if ids != sorted(set(ids)):
        problems.append(f"job {job_id}: stream ids not strictly increasing")
    return problems


def _check_writers(
    job_id: str,
    record: dict[str, str],
    events: list[Event],
    queue: Queue,
    writer_of: Callable[[Any], Hashable],
    result_writer: Callable[[Any], Hashable] | None,
) -> list[str]:
    problems = []
    last = segments(events)[-1]
    writers = {writer_of(e.data) for e in last}
    if len(writers) > 1:
        problems.append(f"job {job_id}: chunks of two holders in one attempt: {writers}")
    if record["status"] == "completed" and result_writer is not None and writers:
        stored = result_writer(queue.result_codec.decode(record["result"]))
        if writers != {stored}:
            problems.append(
                f"job {job_id}: result from {stored!r} but its last attempt's chunks from "
                f"{writers}: a stale holder's writes were accepted"
            )
    return problems


def _check_view(
    job_id: str,
    record: dict[str, str],
    view: list[Event],
    queue: Queue,
    text_of: Callable[[Any], str],
) -> list[str]:
    problems = []
    ids = [_order(e.id) for e in view]
    if ids != sorted(set(ids)):
        problems.append(f"job {job_id}: a viewer saw ids out of order or twice")
    terminal = [i for i, e in enumerate(view) if e.terminal]
    if len(terminal) > 1 or (terminal and terminal[0] != len(view) - 1):
        problems.append(f"job {job_id}: a viewer saw terminal events at {terminal} of {len(view)}")
    if terminal and view[-1].type == "completed" and record["status"] == "completed":
        expected = text_of(queue.result_codec.decode(record["result"]))
        shown = visible_text(view)
        if shown != expected:
            problems.append(
                f"job {job_id}: a viewer shows {shown[:80]!r}... ({len(shown)} chars), the "
                f"result is {expected[:80]!r}... ({len(expected)} chars)"
            )
    if terminal and view[-1].type != record["status"]:
        problems.append(f"job {job_id}: a viewer saw {view[-1].type}, record is {record['status']}")
    return problems


async def _members(queue: Queue) -> dict[str, set[str]]:
    k = queue.keys
    async with queue.redis.pipeline(transaction=False) as pipe:
        for name in LIVE_SETS:
            pipe.zrange(getattr(k, name), 0, -1)
        pipe.hkeys(k.rank)
        replies = await pipe.execute()
    sets = {
        name: {_s(m) for m in members}
        for name, members in zip(LIVE_SETS, replies[:-1], strict=True)
    }
    sets["rank"] = {_s(m) for m in replies[-1]}
    return sets  # type: ignore[return-value]


async def _check_sets(queue: Queue, audit: Audit) -> list[str]:
    """Each job sits in the one set its status names; the sets name only such jobs."""
    problems = []
    sets = await _members(queue)
    expected_set = {
        "waiting": {"ready", "leases"},  # leases: claimed, not yet activated
        # A due job is promoted to the ready set (and claimed) with its record still saying
        # scheduled; activate.lua accepts both.
        "scheduled": {"scheduled", "ready", "leases"},
        "active": {"leases"},
        "failed": {"dead"},
        "completed": set(),
        "cancelled": set(),
    }
    for job_id, status in audit.statuses.items():
        inside = [name for name in LIVE_SETS if job_id in sets[name]]
        if len(inside) > 1:
            problems.append(f"job {job_id} ({status}) is in several sets: {inside}")
        if not set(inside) <= expected_set[status]:
            problems.append(f"job {job_id} is {status} but in {inside}")
        if status in ("waiting", "scheduled", "active") and not inside:
            problems.append(f"job {job_id} is {status} but in no set: nobody will run it")
        if status == "active" and not audit.records[job_id].get("token"):
            problems.append(f"job {job_id} is active without a lease token")
        in_rank = job_id in sets["rank"]
        if in_rank != (job_id in sets["scheduled"]):
            problems.append(f"job {job_id}: rank entry {in_rank}, scheduled {not in_rank}")
    # Members whose record is gone (or not ours to know): the record must exist and agree.
    unknown = set().union(*(sets[n] for n in ("ready", "scheduled", "leases"))) - set(
        audit.statuses
    )
    if unknown:
        async with queue.redis.pipeline(transaction=False) as pipe:
            for job_id in unknown:
                pipe.hget(queue.keys.job(job_id), "status")
            statuses = await pipe.execute()
        for job_id, status in zip(unknown, statuses, strict=True):
            status = _s(status)
            if status is None or status in TERMINAL_STATUSES:
                problems.append(f"queue sets name job {job_id} whose record is {status}")
    return problems


async def check_intake(queue: Queue) -> list[str]:
    """Invariant 11 (module docstring), over every entry of the intake; then admits them."""
    problems = []
    redis, k = queue.redis, queue.keys
    entries = [(_s(e) or "").split("\0") for e in await redis.lrange(k.intake, 0, -1)]
    sets = await _members(queue)
    async with redis.pipeline(transaction=False) as pipe:
        for *_, job_id in entries:
            pipe.hmget(k.job(job_id), "status", "created_at", "tenant", "rank")
        records = await pipe.execute()
    seen: set[str] = set()
    for (created, tenant, rank, job_id), fields in zip(entries, records, strict=True):
        status, r_created, r_tenant, r_rank = (_s(f) for f in fields)
        if job_id in seen:
            problems.append(f"job {job_id} is in the intake twice")
        seen.add(job_id)
        if status != "waiting":
            problems.append(f"the intake names job {job_id}, whose record is {status}")
        elif (int(created), tenant, rank) != (int(r_created or 0), r_tenant or "", r_rank):
            problems.append(f"job {job_id}'s intake entry disagrees with its record")
        inside = [name for name in LIVE_SETS if job_id in sets[name]]
        if inside:
            problems.append(f"job {job_id} is in the intake and in {inside}")
    await queue.admit()
    return problems


async def check_fair_share(queue: Queue) -> list[str]:
    """Invariant 7 (module docstring), over every job of the queue, not only accepted ones."""
    problems = []
    redis, k = queue.redis, queue.keys
    async with redis.pipeline(transaction=False) as pipe:
        pipe.zrange(k.ready, 0, -1, withscores=True)
        pipe.zrange(k.lines, 0, -1)
        pipe.zrange(k.turns, 0, -1)
        pipe.zrange(k.parked, 0, -1)
        pipe.hgetall(k.running)
        pipe.zrange(k.leases, 0, -1)
        ready, lines, turns, parked, running, leased = await pipe.execute()
    in_line: dict[str, tuple[str, int]] = {}
    for entry in lines:
        tenant, rank, job_id = entry.split(b"\0")
        in_line[job_id.decode()] = (tenant.decode(), int(rank))
    ranked = {_s(job): int(score) for job, score in ready}
    if {j: r for j, (_, r) in in_line.items()} != ranked:
        problems.append(f"ready set {ranked} is not the tenants' lines {in_line}")
    tenants_waiting = {tenant for tenant, _ in in_line.values()}
    turns_set, parked_set = {_s(t) for t in turns}, {_s(t) for t in parked}
    if turns_set & parked_set:
        problems.append(f"tenants both taking turns and parked: {turns_set & parked_set}")
    if turns_set | parked_set != tenants_waiting:
        problems.append(f"tenants in turns {turns_set} / parked {parked_set}, but with runnable "
                        f"jobs: {tenants_waiting}")  # fmt: skip
    ids = [_s(job) for job in leased] + list(in_line)
    async with redis.pipeline(transaction=False) as pipe:
        for job_id in ids:
            pipe.hmget(k.job(job_id), "status", "tenant")
        # A record without a tenant field is the default tenant's (enqueue.lua leaves it out).
        owners = {
            job_id: None if status is None else (tenant or b"")
            for job_id, (status, tenant) in zip(ids, await pipe.execute(), strict=True)
        }
    holding: dict[str, int] = {}
    for job in leased:
        tenant = owners[_s(job)]
        if tenant is not None:
            holding[_s(tenant)] = holding.get(_s(tenant), 0) + 1
    counted = {_s(t): int(n) for t, n in running.items()}
    if counted != holding:
        problems.append(f"running counts {counted} but leases held per tenant {holding}")
    strays = [j for j, (t, _) in in_line.items() if _s(owners[j] or b"") != t]
    if strays:
        problems.append(f"jobs in another tenant's line: {strays}")
    return problems


async def check_waits(queue: Queue) -> list[str]:
    """Invariant 12 (module docstring), over every job of the queue."""
    k = queue.keys

    def fill(pipe: Any) -> None:
        pipe.zrange(k.ready, 0, -1)
        pipe.zrange(k.waits, 0, -1, withscores=True)

    (ready, waits), now = await queue.read_with_time(fill)
    problems = []
    in_line, waiting = {_s(j) for j in ready}, {_s(j): since for j, since in waits}
    if waiting.keys() != in_line:
        problems.append(f"the waits {sorted(waiting)} are not the ready set {sorted(in_line)}")
    future = {j: since for j, since in waiting.items() if since > now * 1000 + 1}
    if future:
        problems.append(f"jobs waiting since a time still to come: {future}")
    return problems


async def check_holds(queue: Queue) -> list[str]:
    """Invariant 10 (module docstring), over every job of the queue."""
    redis, k = queue.redis, queue.keys
    async with redis.pipeline(transaction=False) as pipe:
        pipe.hgetall(k.holders)
        pipe.zrange(k.holds, 0, -1)
        pipe.zrange(k.leases, 0, -1)
        holders, holds, leased = await pipe.execute()
    by_hash = {(_s(job), _s(holder)) for job, holder in holders.items()}
    by_set = {(job.decode(), holder.decode()) for holder, job in (h.split(b"\0") for h in holds)}
    problems = []
    if by_hash != by_set:
        problems.append(f"holders {sorted(by_hash)} differ from holds {sorted(by_set)}")
    unleased = {job for job, _ in by_hash | by_set} - {_s(job) for job in leased}
    if unleased:
        problems.append(f"holds of jobs without a lease: {sorted(unleased)}")
    return problems


async def check_hand_offs(queue: Queue) -> list[str]:
    """Invariant 13 (module docstring), over the queue's offers and hand-offs."""
    redis, k = queue.redis, queue.keys
    problems = []
    holders = []
    for raw in await redis.lrange(k.idle, 0, -1):
        parts = _s(raw).split("\0")
        if len(parts) != 4 or not (parts[2].isdigit() and parts[3].isdigit()):
            problems.append(f"malformed offer {raw!r}")
        holders.append(parts[0])
    if len(set(holders)) < len(holders):
        problems.append(f"more than one offer of one worker: {sorted(holders)}")
    for raw in await redis.lrange(k.handoffs, 0, -1):
        holder, token, job_id, fields = _s(raw).split("\0", 3)
        listed = dict(zip(*[iter(json.loads(fields))] * 2, strict=True))
        record = {_s(a): _s(b) for a, b in (await redis.hgetall(k.job(job_id))).items()}
        if record != listed or record.get("status") != "active" or record["token"] != token:
            problems.append(f"hand-off of {job_id} is not its record as started: {record}")
        if await redis.zscore(k.leases, job_id) is None:
            problems.append(f"hand-off of {job_id} without a lease")
        if _s(await redis.hget(k.holders, job_id)) != holder:
            problems.append(f"hand-off of {job_id} not filed under {holder}")
    return problems


async def check_usage(queue: Queue) -> list[str]:
    """Invariant 9 (module docstring), over every job of the queue."""
    redis, k = queue.redis, queue.keys
    await queue.fold_usage()  # the attempts still in the days' journals join the counters
    ids = [_s(e).split("\0")[-1] for e in await redis.zrange(k.index, 0, -1)]
    async with redis.pipeline(transaction=False) as pipe:
        for job_id in ids:
            pipe.hmget(k.job(job_id), "status", "usage", "history")
        pipe.hgetall(k.usage_total)
        *records, counters = await pipe.execute()
    if any(status is None for status, _, _ in records):
        return []  # a record expired: its usage stays counted, the sum cannot be redone
    expected: dict[str, int] = {}
    metered = 0
    filed = {_s(f) for f in await redis.hkeys(k.lost)}
    for job_id, (_, usage, history) in zip(ids, records, strict=True):
        for name, n in json.loads(_s(usage) if usage else "{}").items():
            if name != "estimated":
                expected[name] = expected.get(name, 0) + int(n)
        attempts = json.loads(_s(history) if history else "[]")
        metered += sum(1 for a in attempts if "usage" in a)
        for a in attempts:
            if a["outcome"] == "lease_expired":
                key = f"{job_id}\0{a['attempt']}"
                if ("usage" in a) == (key in filed):
                    return [f"lost attempt {key!r}: metered and filed, or neither"]
    counted: dict[str, int] = {}
    for field_name, value in counters.items():
        name = _s(field_name).split("\0")[2]
        counted[name] = counted.get(name, 0) + int(value)
    if metered:
        expected["attempts"] = metered
    counted.pop("estimated_attempts", None)
    if counted != expected:
        return [f"usage counters {counted} != the records' sum {expected}"]
    return []


async def check_index(queue: Queue) -> list[str]:
    """Invariant 8 (module docstring), over every job of the queue."""
    problems = []
    redis, k = queue.redis, queue.keys
    async with redis.pipeline(transaction=False) as pipe:
        pipe.zrange(k.index, 0, -1)
        pipe.zrange(k.tenant_index, 0, -1)
        pipe.zrange(k.index_expiry, 0, -1)
        index, tenant_index, expiring = await pipe.execute()
    expiring_ids = {_s(e).split("\0")[-1] for e in expiring}
    listed: dict[str, set[str]] = {}
    for entry in index:
        status, _, job_id = _s(entry).split("\0")
        listed.setdefault(job_id, set()).add(f"{status}")
    for entry in tenant_index:
        tenant, status, _, job_id = _s(entry).split("\0")
        listed.setdefault(job_id, set()).add(f"{tenant}/{status}")
    record_prefix = k.job("")
    keys = await _scan(queue)
    job_ids = [key[len(record_prefix) :] for key in keys if key.startswith(record_prefix)]
    async with redis.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hmget(k.job(job_id), "status", "tenant")
        states = await pipe.execute()
    for job_id, (status, tenant) in zip(job_ids, states, strict=True):
        if status is None:
            continue  # expired between the scan and the read
        listed_as = "waiting" if _s(status) == "active" else _s(status)  # see _job_index.py
        want = {listed_as, f"{_s(tenant or b'')}/{listed_as}"}
        got = listed.pop(job_id, set())
        if got != want:
            problems.append(f"job {job_id} is listed as {got}, not {want}")
    for job_id, where in listed.items():
        if job_id not in expiring_ids:
            problems.append(f"the index lists job {job_id} ({where}) that has no record")
    return problems


async def _scan(queue: Queue) -> list[str]:
    tag = queue.keys.tag
    pattern = tag.replace("[", "\\[").replace("]", "\\]").replace("*", "\\*") + ":*"
    return [_s(key) async for key in queue.redis.scan_iter(match=pattern, count=1000)]


async def _check_keys(queue: Queue, audit: Audit) -> list[str]:
    """Per-job keys of finished jobs expire, within their retention; none dangle."""
    problems = []
    tag = queue.keys.tag
    keys = await _scan(queue)
    per_job = [key for key in keys if key.split(":", 2)[1] in ("job", "events", "idem")]
    async with queue.redis.pipeline(transaction=False) as pipe:
        for key in per_job:
            pipe.pttl(key)
            if ":idem:" in key:
                pipe.get(key)
            else:
                pipe.hmget(queue.keys.job(key.split(":", 2)[2]), "status", "idem_ttl")
        replies = await pipe.execute()
    longest = max(queue.result_ttl, queue.dead_ttl) * 1000
    for i, key in enumerate(per_job):
        ttl, extra = replies[2 * i], replies[2 * i + 1]
        kind, name = key[len(tag) + 1 :].split(":", 1)
        if kind == "idem":
            bound = _s(extra)
            owner = audit.records.get(bound or "")
            if owner is None:
                owner_status = _s(await queue.redis.hget(queue.keys.job(bound or ""), "status"))
                if owner_status is None and ttl < 0:
                    problems.append(f"idempotency key {name!r} points at missing job {bound}")
                continue
            if owner.get("idempotency_key") != name:
                problems.append(f"idempotency key {name!r} points at {bound}, which has another")
            if owner["status"] in ("failed", "cancelled"):
                problems.append(f"idempotency key {name!r} still bound to {owner['status']} job")
            if owner["status"] == "completed" and ttl < 0:
                problems.append(f"idempotency key {name!r} of a completed job never expires")
            continue
        status, idem_ttl = (_s(v) for v in extra)
        if status is None:
            if ttl < 0:
                problems.append(f"orphan key {key}: no record and no TTL")
        elif status in TERMINAL_STATUSES:
            limit = max(longest, float(idem_ttl or 0))
            if ttl < 0:
                problems.append(f"key {key} of a {status} job never expires")
            elif ttl > limit:
                problems.append(f"key {key} of a {status} job lives {ttl} ms > {limit} ms")
        elif ttl >= 0:
            problems.append(f"key {key} of a {status} job expires: the job would vanish")
    return problems


async def _check_retention(queue: Queue, audit: Audit, retention: float) -> list[str]:
    """Waits up to ``retention`` s for the finished jobs' keys to expire; then none is left."""
    finished = {j for j, s in audit.statuses.items() if s in TERMINAL_STATUSES}
    deadline = time.monotonic() + retention
    while True:
        keys = await _scan(queue)
        left = [k for k in keys if k.split(":", 2)[1] in ("job", "events") and _tail(k) in finished]
        idem = [k for k in keys if k.split(":", 2)[1] == "idem"]
        if idem:
            bound = await queue.redis.mget(idem)
            left += [k for k, b in zip(idem, bound, strict=True) if _s(b) in finished]
        if not left:
            break
        if time.monotonic() > deadline:
            return [f"after {retention}s of retention these keys remain: {left[:10]}"]
        await asyncio.sleep(0.1)
    sets = await _members(queue)
    problems = []
    for name in ("ready", "scheduled", "leases", "rank"):
        stale = sets[name] & finished
        if stale:
            problems.append(f"after retention, {name} still names finished jobs {sorted(stale)}")
    dead_scores = await queue.redis.zrange(queue.keys.dead, 0, -1, withscores=True)
    now_ms = await queue.server_time() * 1000
    for member, died in dead_scores:
        job_id = _s(member)
        recent = died > now_ms - queue.dead_ttl * 1000
        if job_id in finished and recent and not await queue.redis.exists(queue.keys.job(job_id)):
            problems.append(f"dead entry {job_id} outlived its record")
    return problems


def dumps(events: Sequence[Event]) -> str:
    """A compact trace of events, for assertion messages."""
    return json.dumps([(e.type, e.data if e.type == "chunk" else None) for e in events])[:2000]
