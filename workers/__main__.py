"""``python -m workers``: the generation worker process (same as ``genq worker``)."""

from workers.run import run_worker

if __name__ == "__main__":
    run_worker()
