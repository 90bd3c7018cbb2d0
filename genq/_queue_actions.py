"""An operator's actions on one job: cancel, retry, delete (each one script call that checks
the job's idempotency key, :meth:`QueueBase.run_keyed`)."""

from __future__ import annotations

from ._calls import cancel_call, delete_call, retry_call
from ._errors import JobNotFinishedError
from ._queue_base import QueueBase
from ._scripts import Code


class JobActions(QueueBase):
    """What :class:`genq.Queue` does to a job on request."""

    async def cancel(self, job_id: str) -> bool:
        """Cancels a job. True if the job will not produce a result (now, or ever)."""
        reply = await self.run_keyed(
            job_id, lambda idem: self.scripts.cancel(*cancel_call(self, job_id, idem))
        )
        return bool(reply[0] == 1)

    async def retry(self, job_id: str) -> bool:
        """Puts a failed or cancelled job back in line with fresh attempts, under the same id;
        its old output is dropped (watchers get ``restarted``). False for any other job."""
        return await self._retry(job_id, cancelled_too=True)

    async def retry_dead(self, job_id: str) -> bool:
        """Puts a dead-lettered job back with fresh attempts; its old output is dropped."""
        return await self._retry(job_id, cancelled_too=False)

    async def _retry(self, job_id: str, cancelled_too: bool) -> bool:
        reply = await self.run_keyed(
            job_id,
            lambda idem: self.scripts.retry(*retry_call(self, job_id, idem, cancelled_too)),
        )
        return bool(reply[0] == 1)

    async def delete(self, job_id: str) -> bool:
        """Deletes a finished job for good (record, output, listing entries, its idempotency
        key). False when there is no such job; :class:`JobNotFinishedError` when it has not
        finished (cancel it first)."""
        reply = await self.run_keyed(
            job_id, lambda idem: self.scripts.delete(*delete_call(self, job_id, idem))
        )
        if reply[0] == Code.EXISTS:
            raise JobNotFinishedError(job_id)
        return bool(reply[0] == 1)
