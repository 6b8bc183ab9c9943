import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup(set_prefix=False)

from config.handlers import ProjectWSGIHandler  # noqa: E402  (after the apps are loaded)

# Django's WSGI handler, with a shorter middleware chain for the JSON APIs (config/handlers.py).
application = ProjectWSGIHandler()

from config.startup import refuse_weak_runtime_tokens  # noqa: E402  (settings are loaded by now)

refuse_weak_runtime_tokens()
