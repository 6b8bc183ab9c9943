"""How the admin writes times (``FORMAT_MODULE_PATH``): Django's English formats, with the
seconds an operator needs to order a job's events (its lock, its heartbeats, its result)."""

DATETIME_FORMAT = "N j, Y, H:i:s"
SHORT_DATETIME_FORMAT = "Y-m-d H:i:s"
TIME_FORMAT = "H:i:s"
