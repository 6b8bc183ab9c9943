"""``python -m runtime_worker``: the reference runtime (``runtime_worker.program``)."""

from runtime_worker.program import main

main()
