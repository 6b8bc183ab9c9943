"""What operators see: the log context and its formats, request ids,
and the counters every process records. The gauges, ``/metrics``, the probes and
the dashboard are the ``ops`` app's: it sits above every app whose state it reads."""
