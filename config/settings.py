"""One settings module. Every value comes from the environment with the documented defaults
(docs/operations/production.md).

The embedded default (no variable set) is SQLite, a local-memory cache and a
filesystem Celery broker, so ``make run`` needs no server. ``DATABASE_URL``,
``REDIS_URL`` and ``CELERY_BROKER_URL`` turn the same code into the production setup.
"""

import os
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import environ
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from config.observability.logging import logging_config
from config.rates import parse_intervals, parse_rate

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
# First: every value below, VAR_DIR included, may come from ``.env`` (the environment wins).
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)
VAR_DIR = Path(env.str("VAR_DIR", default=str(BASE_DIR / "var")))

DEBUG = env.bool("DEBUG", default=False)
# Development only (``make run`` sets DEBUG): with DEBUG false no process starts on it (below).
DEVELOPMENT_SECRET_KEY = "django-insecure-embedded-default-set-SECRET_KEY-in-production"
SECRET_KEY = env.str("SECRET_KEY", default=DEVELOPMENT_SECRET_KEY)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "config.admin_actions.AdminConfig",  # django.contrib.admin, with the project's site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework_simplejwt",
    "rest_framework_simplejwt.token_blacklist",  # used-up refresh tokens (accounts.services)
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "accounts",
    "ai_jobs",
    "learning",
    "credentials",
    "quotas",
    "asynch",
    "delivery",
    "runtime_worker",
    "ops",
    "axes",
    "csp",
]

MIDDLEWARE = [
    "config.observability.middleware.ObservabilityMiddleware",  # first: request id, HTTP metrics
    "django.middleware.security.SecurityMiddleware",
    "config.middleware.RejectNulMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "config.admin_sessions.OperatorSessionMiddleware",  # idle and longest admin sessions
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "config.middleware.PagesCSPMiddleware",  # the admin's pages and the API docs (config/middleware.py)
    "axes.middleware.AxesMiddleware",  # last: turns an admin login it refused into the lockout page
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several processes (web, Celery, runtime) share the file: wait for the writer
    # instead of failing, and take the write lock at BEGIN so no transaction has
    # to be retried halfway.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL;",
    }
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DB_CONN_MAX_AGE", default=60))
    # A persistent connection is checked before each request reuses it, so one the
    # database dropped (a restart, a failover) is replaced, never served as an error.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    # Django's PostgreSQL backend, whose health check polls the idle socket instead of a
    # SELECT 1 round trip on every request (config/postgresql/base.py).
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":  # not PostGIS, say
        DATABASES["default"]["ENGINE"] = "config.postgresql"
    # A database host that does not answer fails a connection in seconds (503), not
    # after the kernel's minutes of TCP retries.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", env.int("DB_CONNECT_TIMEOUT_SECONDS", default=5)
    )
    if env.bool("DB_TRANSACTION_POOLER", default=False):
        # Behind PgBouncer in transaction mode (docs/operations/production.md) consecutive
        # transactions may run on different server connections: no server-side cursors
        # (iterator() declares them WITH HOLD, across transactions), and no prepared
        # statements should parameters ever be bound server-side (Django binds them on
        # the client by default, which prepares nothing).
        DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
        DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = None
    elif env.bool("DB_PREPARED_STATEMENTS", default=True):
        # Parameters bound by the server, and a statement a connection has run
        # DB_PREPARE_THRESHOLD times prepared (psycopg keeps 100 a connection): PostgreSQL
        # then neither parses nor plans it again. The hot path is a few fixed statements
        # run over and over; planning was most of their database time.
        DATABASES["default"]["OPTIONS"]["server_side_binding"] = True
        DATABASES["default"]["OPTIONS"]["prepare_threshold"] = env.int("DB_PREPARE_THRESHOLD", default=5)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Covering indexes (INCLUDE) are PostgreSQL's; SQLite builds the same index without them.
SILENCED_SYSTEM_CHECKS = ["models.W040"]

REDIS_URL = env.str("REDIS_URL", default="")
# Every Redis client of the project (cache, throttles, semaphore) gives up on a Redis
# that does not answer after this long: the request gets a 503, a worker retries.
REDIS_TIMEOUT_SECONDS = env.float("REDIS_TIMEOUT_SECONDS", default=2.0)
REDIS_CLIENT_OPTIONS = {
    "socket_connect_timeout": REDIS_TIMEOUT_SECONDS,
    "socket_timeout": REDIS_TIMEOUT_SECONDS,
    "socket_keepalive": True,
    "health_check_interval": 30,
}
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "config.cache.RedisCache",  # Django's, one client per pool
            "LOCATION": REDIS_URL,
            "OPTIONS": dict(REDIS_CLIENT_OPTIONS),
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

LANGUAGE_CODE = "en-us"
FORMAT_MODULE_PATH = ["config.formats"]  # the admin's times with their seconds
TIME_ZONE = "UTC"
USE_I18N = True
# The languages a push speaks (delivery: the device's locale picks one); the catalogues
# are locale/<language>/LC_MESSAGES/django.po, compiled by make run and make test.
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
MEDIA_ROOT = VAR_DIR / "media"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

REST_FRAMEWORK = {
    # Users authenticate with JWT; the internal and model-asynch APIs name their own.
    "DEFAULT_AUTHENTICATION_CLASSES": ["accounts.api.tokens.UserJWTAuthentication"],
    "DEFAULT_PAGINATION_CLASS": "config.pagination.ContractCursorPagination",
    "PAGE_SIZE": 20,
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # DRF's, with Accept: */* answered without parsing it (config/negotiation.py).
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "config.negotiation.ContentNegotiation",
    "DEFAULT_PARSER_CLASSES": ["config.parsers.StorableJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "config.openapi.ContractAutoSchema",
    "EXCEPTION_HANDLER": "config.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
    # The client's address for the per-IP throttles: REMOTE_ADDR, or with NUM_PROXIES
    # trusted proxies in front, the address they put in X-Forwarded-For.
    "NUM_PROXIES": env.int("NUM_PROXIES", default=0),
}

SPECTACULAR_SETTINGS = {
    "TITLE": "AI job platform",
    "DESCRIPTION": "AI runtime jobs, the internal Runtime API, and the model-asynch middleware.",
    "VERSION": "1.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Besides the enums' own hook: each field's description where its serializer gave none.
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "config.openapi_fields.describe_fields"],
    "ENUM_NAME_OVERRIDES": {
        "ApiKeyModeEnum": "quotas.models.ApiKeyMode",
        "JobTypeEnum": "ai_jobs.job_types.choices",
        "JobStatusEnum": "ai_jobs.models.JobStatus",
        "TargetTypeEnum": "ai_jobs.models.TargetType.values",
        "TaskStateEnum": "asynch.models.TaskState",
        "WebhookEventEnum": "delivery.models.WebhookEvent.values",
    },
}

# What the admin's pages and the API docs may load (docs/operations/security.md): this origin's scripts,
# styles, images and fetches, nothing inline, no plugin, no frame around them. The API docs
# add data: images (Swagger UI's stylesheet carries its icons so).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# A backing service that is down answers 503 SERVICE_UNAVAILABLE with this
# Retry-After (seconds).
SERVICE_UNAVAILABLE_RETRY_AFTER_SECONDS = env.int("SERVICE_UNAVAILABLE_RETRY_AFTER_SECONDS", default=1)

# --- Celery -----------------------------------------------------------------------------------
# Without a broker server the embedded default passes messages through files,
# which every local process (web, worker, beat) can share.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    # The transport ignores the host; naming one keeps kombu from warning in every process.
    CELERY_BROKER_URL = "filesystem://localhost//"
    _broker_dir = VAR_DIR / "celery-broker"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir),
        "data_folder_out": str(_broker_dir),
        "processed_folder": str(VAR_DIR / "celery-processed"),
        "control_folder": str(VAR_DIR / "celery-control"),
        "store_processed": False,
    }
    for _folder in (_broker_dir, VAR_DIR / "celery-processed", VAR_DIR / "celery-control"):
        _folder.mkdir(parents=True, exist_ok=True)
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # A Redis that stops answering (a partition, not a refused connection) is seen
    # within seconds instead of hanging the worker on a dead socket.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "socket_connect_timeout": 5,
        "socket_timeout": 10,
        "socket_keepalive": True,
        "health_check_interval": 30,
    }
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A broker outage is waited out, never a reason to exit (docs/operations/outages.md): the
# worker and beat reconnect for as long as it takes, at startup too.
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# AMQP: a silent broker is seen within two heartbeats.
CELERY_BROKER_HEARTBEAT = env.int("CELERY_BROKER_HEARTBEAT", default=30)
# A task running when the connection drops goes on: a drain holding model answers
# stores them (the database is the truth; a redelivered message finds nothing to do).
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# After a reconnect Celery lowers the prefetch for the tasks still running and raises it again
# as they end; on RabbitMQ the raise never reaches the running consumer and a worker sat idle
# with messages waiting (celery#9512, tests/test_faults_broker.py). Full prefetch at once.
CELERY_WORKER_ENABLE_PREFETCH_COUNT_REDUCTION = env.bool("CELERY_WORKER_ENABLE_PREFETCH_COUNT_REDUCTION", default=False)
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Celery's Django fix-up closes every database connection before and after each task
# (a new connection per task); given a reuse count it leaves them open, closing them
# only every that many tasks, and config.celery treats a task's connections as Django
# treats a request's (CONN_MAX_AGE, the health check).
CELERY_DB_REUSE_MAX = env.int("CELERY_DB_REUSE_MAX", default=1000)

# --- AI runtime jobs --------------------------------------------------------------------------
# No default token: with none set the internal API admits no runtime (make run sets one).
RUNTIME_SERVICE_TOKENS = [t for t in env.list("RUNTIME_SERVICE_TOKENS", default=[]) if t]
AI_JOB_LOCK_SECONDS = env.int("AI_JOB_LOCK_SECONDS", default=60)
AI_JOB_REAPER_INTERVAL_SECONDS = env.int("AI_JOB_REAPER_INTERVAL_SECONDS", default=15)
AI_JOB_REAPER_BATCH_SIZE = env.int("AI_JOB_REAPER_BATCH_SIZE", default=500)
AI_JOB_SNAPSHOT_TTL_SECONDS = env.int("AI_JOB_SNAPSHOT_TTL_SECONDS", default=3600)
AI_JOB_RETRY_BACKOFF_BASE_SECONDS = env.float("AI_JOB_RETRY_BACKOFF_BASE_SECONDS", default=5.0)
AI_JOB_RETRY_BACKOFF_MAX_SECONDS = env.float("AI_JOB_RETRY_BACKOFF_MAX_SECONDS", default=300.0)
AI_JOB_DEFAULT_MAX_RETRY_COUNT = env.int("AI_JOB_DEFAULT_MAX_RETRY_COUNT", default=3)
AI_JOB_DEFAULT_TIMEOUT_SECONDS = env.int("AI_JOB_DEFAULT_TIMEOUT_SECONDS", default=120)
RUNTIME_THROTTLE_RATE = env.str("RUNTIME_THROTTLE_RATE", default="300/min")
USER_THROTTLE_RATE = env.str("USER_THROTTLE_RATE", default="60/min")

PLATFORM_DEEPSEEK_API_KEY = env.str("PLATFORM_DEEPSEEK_API_KEY", default="")
DEEPSEEK_BASE_URL = env.str("DEEPSEEK_BASE_URL", default="https://api.deepseek.com")
DEEPSEEK_MODEL = env.str("DEEPSEEK_MODEL", default="deepseek-chat")

# --- users, quotas, platform budget -----------------------------------------------------------
SIMPLE_JWT = {
    "ACCESS_TOKEN_LIFETIME": timedelta(minutes=env.int("JWT_ACCESS_MINUTES", default=30)),
    "REFRESH_TOKEN_LIFETIME": timedelta(days=env.int("JWT_REFRESH_DAYS", default=7)),
    "AUTH_HEADER_TYPES": ("Bearer",),
    # A token names its user by the opaque public id (accounts), never the integer key.
    "USER_ID_FIELD": "account__public_id",
    "USER_ID_CLAIM": "sub",
    "TOKEN_OBTAIN_SERIALIZER": "accounts.api.tokens.TokenObtainSerializer",
    # A refresh rotates and the token it was given is used up (accounts.services).
    "ROTATE_REFRESH_TOKENS": True,
    "BLACKLIST_AFTER_ROTATION": True,
}
# Accounts: learners register themselves only where this is on (make run
# turns it on); /auth/* is throttled per client IP and per username, registration also
# per client IP on its own.
ALLOW_REGISTRATION = env.bool("ALLOW_REGISTRATION", default=False)
# Per pair of username and client IP; per client IP alone, AUTH_ADDRESS_THROTTLE_RATE (contract section 2).
AUTH_THROTTLE_RATE = env.str("AUTH_THROTTLE_RATE", default="10/min")
AUTH_ADDRESS_THROTTLE_RATE = env.str("AUTH_ADDRESS_THROTTLE_RATE", default="60/min")
# Wrong runtime tokens and X-Api-Keys per client IP (config.auth_failures); the credential test per user.
AUTH_FAILURE_THROTTLE_RATE = env.str("AUTH_FAILURE_THROTTLE_RATE", default="30/min")
CREDENTIAL_TEST_THROTTLE_RATE = env.str("CREDENTIAL_TEST_THROTTLE_RATE", default="10/hour")
REGISTRATION_THROTTLE_RATE = env.str("REGISTRATION_THROTTLE_RATE", default="20/hour")
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Django admin's login (docs/operations/security.md): ADMIN_LOGIN_FAILURE_LIMIT failed logins for one
# username from one address refuse that pair for ADMIN_LOGIN_COOLOFF_MINUTES, with django-axes
# (ops.admin_login). Not /auth/*: the API's logins have their throttles.
ADMIN_LOGIN_FAILURE_LIMIT = env.int("ADMIN_LOGIN_FAILURE_LIMIT", default=5)
ADMIN_LOGIN_COOLOFF_MINUTES = env.int("ADMIN_LOGIN_COOLOFF_MINUTES", default=15)
AUTHENTICATION_BACKENDS = [
    "ops.admin_login.AdminLoginLockoutBackend",  # first: a locked pair is refused before any hashing
    # Django's, by the username in any case or spelling that normalizes to it
    # (accounts.usernames): one account, in the user API and in the admin.
    "accounts.backends.UsernameBackend",
]
AXES_ONLY_ADMIN_SITE = True
AXES_HANDLER = "ops.admin_login.AdminLoginHandler"
AXES_FAILURE_LIMIT = ADMIN_LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=ADMIN_LOGIN_COOLOFF_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# The cool-off runs from the failure that locked the pair; tries while locked do not extend it.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "ops.admin_login.client_address"
AXES_USERNAME_CALLABLE = "ops.admin_login.login_username"
AXES_LOCKOUT_CALLABLE = "ops.admin_login.lockout_response"
AXES_VERBOSE = False  # no banner from every process at start
# ops.admin registers axes' pages itself, its action behind the permission it needs.
AXES_ENABLE_ADMIN = False
# AI analysis is the learner's consent: off for a new user unless this says otherwise.
AI_ANALYSIS_ENABLED_BY_DEFAULT = env.bool("AI_ANALYSIS_ENABLED_BY_DEFAULT", default=False)
AI_DEFAULT_MAX_DAILY_JOBS = env.int("AI_DEFAULT_MAX_DAILY_JOBS", default=20)
AI_DEFAULT_MAX_DAILY_TOKEN_BUDGET = env.int("AI_DEFAULT_MAX_DAILY_TOKEN_BUDGET", default=100_000)
PLATFORM_DAILY_TOKEN_BUDGET = env.int("PLATFORM_DAILY_TOKEN_BUDGET", default=10_000_000)
PLATFORM_DAILY_COST_BUDGET_CENTS = env.int("PLATFORM_DAILY_COST_BUDGET_CENTS", default=50_000)
PLATFORM_CIRCUIT_FAILURE_THRESHOLD = env.int("PLATFORM_CIRCUIT_FAILURE_THRESHOLD", default=10)
PLATFORM_CIRCUIT_HALF_OPEN_MAX_JOBS = env.int("PLATFORM_CIRCUIT_HALF_OPEN_MAX_JOBS", default=2)
# The operator's day: the platform budget's day and model-asynch's daily statistics
# turn at midnight here (users' quotas turn at their own midnight). An IANA name.
PLATFORM_TIMEZONE = env.str("PLATFORM_TIMEZONE", default="UTC").strip()
try:
    ZoneInfo(PLATFORM_TIMEZONE)
except (ZoneInfoNotFoundError, ValueError):
    raise ImproperlyConfigured(
        f"PLATFORM_TIMEZONE={PLATFORM_TIMEZONE!r} is not an IANA time zone name, such as UTC or Asia/Shanghai."
    ) from None
# A user holds at most this many learning objects of each kind (knowledge bases,
# materials, knowledge points, study records): what a snapshot is built from stays bounded.
LEARNING_MAX_OBJECTS_PER_USER = env.int("LEARNING_MAX_OBJECTS_PER_USER", default=10_000)

# --- users' own model keys --------------------------------------------------------------------
# base64 32-byte AES-256-GCM keys, newest first; an optional "id:" prefix names a key.
# Unset, with DEBUG on (``make run``), a development key is derived from SECRET_KEY.
CREDENTIAL_ENCRYPTION_KEYS = env.list("CREDENTIAL_ENCRYPTION_KEYS", default=[])
# Each process warns when it falls back to the development key; ``make run`` says it once
# in its summary and turns the per-process warning off (``check --deploy`` still flags it).
CREDENTIAL_DEV_KEY_WARNING = env.bool("CREDENTIAL_DEV_KEY_WARNING", default=True)

# --- refusing to start ------------------------------------------------------------------------
# Every process loads these settings (web, worker, beat, the runtime, manage.py), so with
# DEBUG false none of them starts on the public development SECRET_KEY or with the
# credential key derived from it; ``make run`` turns DEBUG on for its own processes.
if not DEBUG:
    _unsafe = [
        problem
        for problem, bad in (
            ("SECRET_KEY is missing or the development default", SECRET_KEY in ("", DEVELOPMENT_SECRET_KEY)),
            ("CREDENTIAL_ENCRYPTION_KEYS is unset", not any(entry.strip() for entry in CREDENTIAL_ENCRYPTION_KEYS)),
        )
        if bad
    ]
    if _unsafe:
        raise ImproperlyConfigured(
            f"DEBUG is false, and {'; '.join(_unsafe)}. Set them (docs/operations/production.md), "
            "or DEBUG=true on a development machine (make run does)."
        )

# --- model-asynch -----------------------------------------------------------------------------
ASYNCH_WORKER_ENABLED = env.bool("ASYNCH_WORKER_ENABLED", default=True)
ASYNCH_WORKER_POLL_INTERVAL = env.float("ASYNCH_WORKER_POLL_INTERVAL", default=1.0)
ASYNCH_WORKER_BATCH_SIZE = env.int("ASYNCH_WORKER_BATCH_SIZE", default=10)
ASYNCH_WORKER_CONCURRENCY = env.int("ASYNCH_WORKER_CONCURRENCY", default=4)
ASYNCH_TASK_TIMEOUT_SECONDS = env.int("ASYNCH_TASK_TIMEOUT_SECONDS", default=3600)
ASYNCH_CLEANER_ENABLED = env.bool("ASYNCH_CLEANER_ENABLED", default=True)
ASYNCH_CLEANER_INTERVAL = env.float("ASYNCH_CLEANER_INTERVAL", default=30.0)
ASYNCH_CLEANER_BATCH_SIZE = env.int("ASYNCH_CLEANER_BATCH_SIZE", default=500)
ASYNCH_CLEANER_MAX_BATCHES = env.int("ASYNCH_CLEANER_MAX_BATCHES", default=20)  # per step and run: bounded
# A running task's lease and its semaphore slot's: renewed while the call runs, so a
# worker that dies gives both back after this long.
ASYNCH_LEASE_SECONDS = env.float("ASYNCH_LEASE_SECONDS", default=30.0)
ASYNCH_WORKER_DRAIN_SECONDS = env.float("ASYNCH_WORKER_DRAIN_SECONDS", default=60.0)
ASYNCH_SEMAPHORE_REDIS_URL = env.str("ASYNCH_SEMAPHORE_REDIS_URL", default=REDIS_URL)  # empty: a file, one machine
ASYNCH_DEFAULT_AUTO_CLEAN_SECONDS = env.int("ASYNCH_DEFAULT_AUTO_CLEAN_SECONDS", default=3600)  # deleted configs
ASYNCH_RESULT_STORAGE = env.str("ASYNCH_RESULT_STORAGE", default="django")  # or "s3", "oss_service"
# ASYNCH_RESULT_STORAGE=s3: any S3-compatible bucket (AWS S3, Aliyun OSS, MinIO) through
# django-storages; empty values fall back to boto3's own (its environment, instance roles).
ASYNCH_S3_BUCKET = env.str("ASYNCH_S3_BUCKET", default="")
ASYNCH_S3_ENDPOINT_URL = env.str("ASYNCH_S3_ENDPOINT_URL", default="")  # e.g. https://oss-cn-hangzhou.aliyuncs.com
ASYNCH_S3_REGION = env.str("ASYNCH_S3_REGION", default="")
ASYNCH_S3_ACCESS_KEY_ID = env.str("ASYNCH_S3_ACCESS_KEY_ID", default="")
ASYNCH_S3_SECRET_ACCESS_KEY = env.str("ASYNCH_S3_SECRET_ACCESS_KEY", default="")
ASYNCH_S3_ADDRESSING_STYLE = env.str("ASYNCH_S3_ADDRESSING_STYLE", default="")  # "virtual" for Aliyun OSS; "path"
ASYNCH_STORAGE_ALIAS = env.str("ASYNCH_STORAGE_ALIAS", default="default")
ASYNCH_DOWNLOAD_URL_MAX_AGE = env.int("ASYNCH_DOWNLOAD_URL_MAX_AGE", default=86400)
ASYNCH_PUBLIC_BASE_URL = env.str("ASYNCH_PUBLIC_BASE_URL", default="")
OSS_UPLOAD_URL = env.str("OSS_UPLOAD_URL", default="")
ASYNCH_OSS_TIMEOUT_SECONDS = env.float("ASYNCH_OSS_TIMEOUT_SECONDS", default=60.0)
ASYNCH_STORAGE_ATTEMPTS = env.int("ASYNCH_STORAGE_ATTEMPTS", default=3)  # uploads retried without a new model call
ASYNCH_API_KEY_CACHE_SECONDS = env.float("ASYNCH_API_KEY_CACHE_SECONDS", default=5.0)  # 0: look up every call
# Hosts (names or addresses) a model config's baseUrl may name although they are not
# https:// or resolve to a loopback, link-local or private address: model services on
# the platform's own network. Empty: only public https:// hosts.
ASYNCH_ALLOWED_MODEL_HOSTS = env.list("ASYNCH_ALLOWED_MODEL_HOSTS", default=[])
# A model answer larger than this is a failed call, read as a stream and never stored whole.
ASYNCH_MAX_ANSWER_BYTES = env.int("ASYNCH_MAX_ANSWER_BYTES", default=16 * 1024 * 1024)

# --- the reference runtime --------------------------------------------------------------------
RUNTIME_API_URL = env.str("RUNTIME_API_URL", default="http://127.0.0.1:8000")
RUNTIME_SERVICE_TOKEN = env.str("RUNTIME_SERVICE_TOKEN", default="")
RUNTIME_INSTANCE_ID = env.str("RUNTIME_INSTANCE_ID", default="")
RUNTIME_CONCURRENCY = env.int("RUNTIME_CONCURRENCY", default=4)
RUNTIME_CAPABILITIES = env.list("RUNTIME_CAPABILITIES", default=[])
RUNTIME_HEARTBEAT_SECONDS = env.float("RUNTIME_HEARTBEAT_SECONDS", default=20)
RUNTIME_POLL_INTERVAL_MS = env.int("RUNTIME_POLL_INTERVAL_MS", default=1000)

# How many machines run the web and worker processes (docs/operations/production.md, several
# machines). Above 1, check --deploy warns about what is kept on one machine's disk.
DEPLOYMENT_MACHINES = env.int("DEPLOYMENT_MACHINES", default=1)

# --- delivery: the outbox, pushes (docs: Operations, Settings; contract section 11) ---------------
# The outbox's beat pass: due retries, and new deliveries whose after-commit message was lost.
DELIVERY_DISPATCH_INTERVAL_SECONDS = env.float("DELIVERY_DISPATCH_INTERVAL_SECONDS", default=5.0)
DELIVERY_DISPATCH_BATCH_SIZE = env.int("DELIVERY_DISPATCH_BATCH_SIZE", default=500)
# How long a send task holds its claim of a delivery: longer than any sender's timeout.
DELIVERY_CLAIM_SECONDS = env.int("DELIVERY_CLAIM_SECONDS", default=120)
APNS_ENDPOINT = env.str("APNS_ENDPOINT", default="https://api.push.apple.com")
APNS_KEY_FILE = env.str("APNS_KEY_FILE", default="")  # the team's .p8 signing key
APNS_KEY_ID = env.str("APNS_KEY_ID", default="")
APNS_TEAM_ID = env.str("APNS_TEAM_ID", default="")
APNS_TOPIC = env.str("APNS_TOPIC", default="")  # the app's bundle id
FCM_ENDPOINT = env.str("FCM_ENDPOINT", default="https://fcm.googleapis.com")
FCM_SERVICE_ACCOUNT_FILE = env.str("FCM_SERVICE_ACCOUNT_FILE", default="")
PUSH_CA_FILE = env.str(
    "PUSH_CA_FILE", default=""
)  # trusted for APNs, FCM and the token endpoint instead of the system's
PUSH_TTL_SECONDS = env.int("PUSH_TTL_SECONDS", default=86400)
PUSH_RETRY_BASE_SECONDS = env.float("PUSH_RETRY_BASE_SECONDS", default=5.0)
PUSH_MAX_ATTEMPTS = env.int("PUSH_MAX_ATTEMPTS", default=5)
PUSH_MAX_DEVICES_PER_USER = env.int("PUSH_MAX_DEVICES_PER_USER", default=20)
PUSH_TIMEOUT_SECONDS = env.float("PUSH_TIMEOUT_SECONDS", default=10.0)
# Webhooks of model-asynch (contract section 11.3). Hosts (names or addresses) an
# endpoint's url may name although they are not https:// or resolve to a loopback,
# link-local or private address. Empty: only public https:// hosts.
WEBHOOK_ALLOWED_HOSTS = env.list("WEBHOOK_ALLOWED_HOSTS", default=[])
# Tried once, then once after each interval, then failed (the Standard Webhooks schedule).
WEBHOOK_RETRY_SCHEDULE = env.str("WEBHOOK_RETRY_SCHEDULE", default="5s,5m,30m,2h,5h,10h,10h")
WEBHOOK_TIMEOUT_SECONDS = env.float("WEBHOOK_TIMEOUT_SECONDS", default=15.0)
# After rotateSecret the old secret signs beside the new one this long.
WEBHOOK_SECRET_OVERLAP_SECONDS = env.int("WEBHOOK_SECRET_OVERLAP_SECONDS", default=86400)
# An endpoint whose every try failed this long is disabled.
WEBHOOK_DISABLE_AFTER_DAYS = env.float("WEBHOOK_DISABLE_AFTER_DAYS", default=5.0)

# --- retention (docs: Operations, Retention) --------------------------------------------------
RETENTION_INTERVAL_SECONDS = env.int("RETENTION_INTERVAL_SECONDS", default=3600)
RETENTION_BATCH_SIZE = env.int("RETENTION_BATCH_SIZE", default=1000)  # rows per short transaction
AI_SNAPSHOT_RETENTION_DAYS = env.int("AI_SNAPSHOT_RETENTION_DAYS", default=7)
AI_JOB_RETENTION_DAYS = env.int("AI_JOB_RETENTION_DAYS", default=90)
AI_NOTIFICATION_RETENTION_DAYS = env.int("AI_NOTIFICATION_RETENTION_DAYS", default=30)
ASYNCH_UNCLAIMED_RETENTION_SECONDS = env.int("ASYNCH_UNCLAIMED_RETENTION_SECONDS", default=604800)
# Daily counters (users' and the platform's usage, model-asynch statistics, breaker events):
# a year of figures, and never the day a quota reads.
AI_COUNTER_RETENTION_DAYS = env.int("AI_COUNTER_RETENTION_DAYS", default=400)
# Push and webhook deliveries finished this long ago, with their attempts (zero: every finished one).
DELIVERY_RETENTION_DAYS = env.int("DELIVERY_RETENTION_DAYS", default=30)
if AI_COUNTER_RETENTION_DAYS < 1:  # a job reserved yesterday still counts its tokens on yesterday
    raise ImproperlyConfigured(f"AI_COUNTER_RETENTION_DAYS={AI_COUNTER_RETENTION_DAYS} must be at least 1 (days).")

# Rates and schedules are read here once, so one that cannot be read stops the process at
# its start, never a request (a 500) or a delivery's retry later.
for _name in (
    "RUNTIME_THROTTLE_RATE", "USER_THROTTLE_RATE", "AUTH_THROTTLE_RATE", "AUTH_ADDRESS_THROTTLE_RATE",
    "AUTH_FAILURE_THROTTLE_RATE", "CREDENTIAL_TEST_THROTTLE_RATE", "REGISTRATION_THROTTLE_RATE",
):  # fmt: skip
    try:
        parse_rate(globals()[_name])
    except ValueError as _error:
        raise ImproperlyConfigured(f"{_name}: {_error}.") from None
try:
    parse_intervals(WEBHOOK_RETRY_SCHEDULE)
except ValueError as _error:
    raise ImproperlyConfigured(f"WEBHOOK_RETRY_SCHEDULE: {_error} (e.g. 5s,5m,30m,2h).") from None

# A bulk operation (ai_jobs.services.bulk) whose run has committed nothing for this long is
# taken to have stopped, and beat's resume-bulk-operations queues it again from its cursor.
BULK_OPERATION_STALL_SECONDS = env.int("BULK_OPERATION_STALL_SECONDS", default=300)

CELERY_BEAT_SCHEDULE = {
    "reap-ai-jobs": {
        "task": "ai_jobs.tasks.reap_jobs",
        "schedule": timedelta(seconds=AI_JOB_REAPER_INTERVAL_SECONDS),
    },
    "sample-ai-queue": {  # the dashboard's queue-depth chart, one sample a minute
        "task": "ai_jobs.tasks.sample_queue",
        "schedule": timedelta(seconds=60),
        "options": {"expires": 55},
    },
    "asynch-work": {
        "task": "asynch.tasks.work",
        "schedule": timedelta(seconds=ASYNCH_WORKER_POLL_INTERVAL),
        "options": {"expires": max(5.0, ASYNCH_WORKER_POLL_INTERVAL * 5)},
    },
    "asynch-clean": {
        "task": "asynch.tasks.clean",
        "schedule": timedelta(seconds=ASYNCH_CLEANER_INTERVAL),
        "options": {"expires": max(5.0, ASYNCH_CLEANER_INTERVAL * 2)},
    },
    "dispatch-deliveries": {  # the outbox's due retries and lost messages (delivery.services.outbox)
        "task": "delivery.tasks.dispatch",
        "schedule": timedelta(seconds=DELIVERY_DISPATCH_INTERVAL_SECONDS),
        "options": {"expires": DELIVERY_DISPATCH_INTERVAL_SECONDS},
    },
    "resume-bulk-operations": {  # a bulk operation whose run stopped goes on from where it got to
        "task": "ai_jobs.tasks.resume_bulk_operations",
        "schedule": timedelta(seconds=60),
        "options": {"expires": 55},
    },
    "prune-data": {  # retention: a run that has not started by the next one is dropped
        "task": "ops.tasks.prune_data",
        "schedule": timedelta(seconds=RETENTION_INTERVAL_SECONDS),
        "options": {"expires": RETENTION_INTERVAL_SECONDS},
    },
}

# --- observability (docs: Operations, Metrics) ------------------------------------------------
LOG_FORMAT = env.str("LOG_FORMAT", default="text")  # or "json": one object per line
LOGGING = logging_config(
    log_format=LOG_FORMAT,
    level=env.str("LOG_LEVEL", default="INFO"),
    levels=env.dict("LOG_LEVELS", default={}),  # logger=LEVEL,...: make run quiets the idle loop's lines
)
# httpx logs each request's URL at INFO: an APNs URL ends with the device's token, which
# no log line may carry. Its warnings and errors still show.
for _quiet in ("httpx", "httpcore"):
    LOGGING["loggers"].setdefault(_quiet, {"level": "WARNING"})
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")  # set: GET /metrics needs it as a bearer token
# Counters and histograms: in one Redis hash shared by every process of every machine,
# flushed from each process's memory every METRICS_FLUSH_SECONDS; with no Redis, in
# prometheus-client's multiprocess files (one machine). Set before prometheus_client loads.
METRICS_REDIS_URL = env.str("METRICS_REDIS_URL", default=REDIS_URL)
METRICS_REDIS_KEY = env.str("METRICS_REDIS_KEY", default="aijobs:metrics")
METRICS_FLUSH_SECONDS = env.float("METRICS_FLUSH_SECONDS", default=1.0)
PROMETHEUS_MULTIPROC_DIR = env.str("PROMETHEUS_MULTIPROC_DIR", default=str(VAR_DIR / "metrics"))
if not METRICS_REDIS_URL:
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", PROMETHEUS_MULTIPROC_DIR)
    Path(PROMETHEUS_MULTIPROC_DIR).mkdir(parents=True, exist_ok=True)
# A runtime instance's "last seen" is written at most this often per web process.
RUNTIME_SEEN_WRITE_SECONDS = env.float("RUNTIME_SEEN_WRITE_SECONDS", default=5.0)
READINESS_TIMEOUT_SECONDS = env.float("READINESS_TIMEOUT_SECONDS", default=2.0)
# Probes often come over plain HTTP from inside the network; a scrape carries a bearer
# token (METRICS_TOKEN), so /metrics is redirected to https like every other path.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]

# HTTPS hardening: off for the embedded setup on plain http://127.0.0.1, on in production
# (docs/operations/production.md). ``check --deploy`` is clean with them set.
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=False)
# Operator sessions (config/admin_sessions.py): idle minutes, and hours after the login at most.
ADMIN_SESSION_IDLE_MINUTES = env.int("ADMIN_SESSION_IDLE_MINUTES", default=60)
ADMIN_SESSION_MAX_HOURS = env.int("ADMIN_SESSION_MAX_HOURS", default=12)
SESSION_COOKIE_AGE = ADMIN_SESSION_MAX_HOURS * 3600  # the cookie lasts no longer than the session may
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=False)
if env.bool("BEHIND_TLS_PROXY", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

STATIC_ROOT.mkdir(parents=True, exist_ok=True)
