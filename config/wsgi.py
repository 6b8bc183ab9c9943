import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

from config.startup import refuse_weak_runtime_tokens  # noqa: E402  (settings are loaded by now)

refuse_weak_runtime_tokens()
