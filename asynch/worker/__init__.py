"""The worker: claims queued tasks and calls their model services.

A Celery task (``asynch.tasks.work``, sent by createTask after commit and by beat
every ``ASYNCH_WORKER_POLL_INTERVAL``) runs ``tasks_drain`` in a worker process:

- one drain per process at a time; it loops until the queue has nothing it may run
  (``asynch.worker.drain``);
- each round claims at most as many tasks as it has free threads
  (``ASYNCH_WORKER_CONCURRENCY``, at most ``ASYNCH_WORKER_BATCH_SIZE`` a round) with
  ``SELECT ... FOR UPDATE SKIP LOCKED``, so any number of processes on any number of
  machines never take one task twice;
- a task is claimed only together with a slot of its (tenant, model) semaphore, so
  no more than ``maxConcurrency`` calls run at once anywhere; a (tenant, model)
  whose slots are all taken is skipped for the round and its tasks keep their place
  (``asynch.worker.claims``);
- a call thread calls the model and stores the answer (``asynch.worker.calls``);
- while calls run the drain renews the slots' and the tasks' leases; a process
  that dies stops renewing and the cleaner fails its tasks, then retries them;
- a drain whose threads are all busy wakes another process to join in.
"""

from asynch.worker.calls import Claimed, ModelCall, model_calls, task_execute
from asynch.worker.claims import tasks_claim
from asynch.worker.drain import tasks_drain, worker_id

__all__ = ["Claimed", "ModelCall", "model_calls", "task_execute", "tasks_claim", "tasks_drain", "worker_id"]
