"""gunicorn's own lines in ``LOG_FORMAT``: the error log, and an access line that
carries the request's id (read from the response, since the request's log context
has closed by the time gunicorn writes it). The access line is the request's one line
(contract §1): a ``4xx`` is a warning; a ``5xx`` is left to Django's line, which says why. Used by ``config/gunicorn.py``. The
formatters keep each line one line, whatever the path holds (``%0a``, ``%0d``)."""

from __future__ import annotations

import logging
import os
from typing import Any

from gunicorn import glogging

from config.observability.logging import ContextFilter, formatter_for


class Logger(glogging.Logger):
    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        formatter = formatter_for(os.environ.get("LOG_FORMAT", "text") or "text")
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                handler.setFormatter(formatter)
                if not any(isinstance(f, ContextFilter) for f in handler.filters):
                    handler.addFilter(ContextFilter())

    def access(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> None:
        if not self.access_log_enabled:
            return
        try:
            headers = resp.headers.items() if hasattr(resp.headers, "items") else resp.headers
            request_id = next((value for name, value in headers if name.lower() == "x-request-id"), None)
            status = str(resp.status).split(None, 1)[0]
            if status >= "500":  # Django's line says it, with its cause (ObservabilityMiddleware)
                return
            millis = request_time.seconds * 1000 + request_time.microseconds / 1000
            path = environ.get("PATH_INFO", "")
            query = environ.get("QUERY_STRING")
            # A refused request is one warning line: this one (Django writes none for it).
            self.access_log.log(
                logging.WARNING if status >= "400" else logging.INFO,
                "%s %s %s %.1fms",
                environ.get("REQUEST_METHOD"),
                f"{path}?{query}" if query else path,
                status,
                millis,
                extra={"requestId": request_id},
            )
        except Exception:
            self.error_log.exception("access log line failed")
