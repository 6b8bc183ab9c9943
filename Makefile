# The two commands: `make run` and `make test`. Both set up everything they need.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat requirements.txt requirements-dev.txt | sha1sum | cut -c1-12)

# Tests run against the real PostgreSQL and Redis of this machine, in TEST_WORKERS pytest-xdist
# worker processes, each with its own test database (test_aijobs_gw0...), Redis database
# (TEST_REDIS_URL's plus the worker's number: 1, 2 and 3 here), VAR_DIR and ports (tests/environment.py).
# Three workers on two cores: much of a test's time is spent waiting (servers starting, an outage
# held for 30 s), and a third worker fills it.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/aijobs
TEST_REDIS_URL ?= redis://127.0.0.1:6379/1
TEST_WORKERS ?= 3
# loadfile: a file's tests run in one worker, in order, sharing its module's servers.
XDIST := -n $(TEST_WORKERS) --dist loadfile

# The embedded default for `make run`: SQLite, no Redis, no broker server.
RUN_PORT ?= 8000
DEV_ADMIN_USER ?= admin
DEV_ADMIN_PASSWORD ?= admin
# The demo learner and the demo model-asynch tenant's X-Api-Key (the README's quick start uses these).
DEV_DEMO_USER ?= demo
DEV_DEMO_PASSWORD ?= demo
DEV_TENANT_KEY ?= ak_demo_make_run_local_key
DEV_RUNTIME_TOKEN ?= dev-runtime-token
STANDIN_PORT ?= 8300
# make run's model-asynch demo calls the stand-in on 127.0.0.1: a host a model config may
# name only when ASYNCH_ALLOWED_MODEL_HOSTS lists it.
# What repeats every second while nothing happens (beat's ticks, the worker's empty runs and
# the poll ticks it discards once expired, the runtime's empty claims), kept out of make run's
# output; LOG_LEVELS= shows it all.
QUIET_LOGGERS ?= celery.beat=WARNING,celery.app.trace=WARNING,celery.worker.strategy=WARNING,celery.worker.request=WARNING,gunicorn.access=WARNING

.PHONY: venv lock browser node pgbouncer prometheus messages run test lint docs docs-serve bench clean

# -qq: errors only (a pip.conf naming missing package folders would print a warning a package).
# --require-hashes: every package, direct or transitive, is the very file that was locked.
$(STAMP): requirements.txt requirements-dev.txt
	@echo "installing requirements-dev.txt into $(VENV) (once, and again when the requirements change)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install -qq --disable-pip-version-check --require-hashes -r requirements-dev.txt
	@rm -f $(VENV)/.installed-* && touch $(STAMP)

# The lock: requirements.in and requirements-dev.in name what the project uses directly,
# runtime_worker/requirements.in what the reference runtime (a program of its own) uses;
# pip-compile pins everything they pull in, each with its hashes. pip-compile itself is
# installed from its own hash-pinned file (requirements-lock.txt).
LOCK_STAMP := $(VENV)-lock/.installed-$(shell sha1sum requirements-lock.txt | cut -c1-12)
LOCK_FLAGS := --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links
$(LOCK_STAMP): requirements-lock.txt
	@test -x $(VENV)-lock/bin/python || $(PYTHON) -m venv $(VENV)-lock
	@$(VENV)-lock/bin/pip install -qq --disable-pip-version-check --require-hashes -r requirements-lock.txt
	@rm -f $(VENV)-lock/.installed-* && touch $(LOCK_STAMP)
lock: $(LOCK_STAMP)
	$(VENV)-lock/bin/pip-compile $(LOCK_FLAGS) -o requirements.txt requirements.in
	$(VENV)-lock/bin/pip-compile $(LOCK_FLAGS) -o requirements-dev.txt requirements-dev.in
	$(VENV)-lock/bin/pip-compile $(LOCK_FLAGS) -o runtime_worker/requirements.txt runtime_worker/requirements.in

venv: $(STAMP)

# The browser tests drive Debian's chromium (Playwright's own download cannot run here);
# the quick start's test runs the README's curl | jq commands.
browser:
	@command -v chromium >/dev/null 2>&1 && command -v jq >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium and jq for the browser and quick-start tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium jq >/dev/null; }

# The generated TypeScript client's test compiles it with tsc and runs it with node (its npm
# packages are pinned in tests/clients/ts/package-lock.json).
node:
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { \
	  echo "installing Debian's nodejs and npm for the generated TypeScript client's test"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }

# tests/test_pgbouncer.py runs its own pgbouncer process (Debian's program; the test starts and stops it).
pgbouncer:
	@test -x /usr/sbin/pgbouncer || { echo "installing Debian's pgbouncer for the connection pooler test"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null; }

# The alert rules are checked and unit-tested by promtool, and tests/test_alerts_prometheus.py runs
# a real Prometheus against a live server (Debian's package ships both programs; its service is
# not wanted, nor node-exporter, which it recommends).
prometheus:
	@test -x /usr/bin/promtool && test -x /usr/bin/prometheus || { \
	  echo "installing Debian's prometheus (prometheus and promtool) for the alert rules' tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }

# The words of pushes in the learner's language (locale/*/LC_MESSAGES/django.po), compiled
# to the .mo files Django reads; msgfmt is Debian's gettext.
messages: venv
	@command -v msgfmt >/dev/null 2>&1 || { echo "installing Debian's gettext to compile the translation catalogues"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gettext >/dev/null; }
	@DEBUG=true $(BIN)/python manage.py compilemessages -v0 --ignore='.venv*' --ignore=var --ignore=node_modules

# DEBUG=true is what makes this a development setup: it lets every process start on the
# development SECRET_KEY and credential key (with DEBUG false they refuse) and dev_bootstrap run.
run: venv messages
	@export DEBUG=$${DEBUG:-true} RUNTIME_SERVICE_TOKENS=$${RUNTIME_SERVICE_TOKENS:-$(DEV_RUNTIME_TOKEN)} WEB_PORT=$(RUN_PORT) \
		RUNTIME_SERVICE_TOKEN=$${RUNTIME_SERVICE_TOKEN:-$(DEV_RUNTIME_TOKEN)} \
		RUNTIME_API_URL=$${RUNTIME_API_URL:-http://127.0.0.1:$(RUN_PORT)} \
		RUNTIME_INSTANCE_ID=$${RUNTIME_INSTANCE_ID:-dev-runtime} \
		RUNTIME_THROTTLE_RATE=$${RUNTIME_THROTTLE_RATE:-3000/min} STANDIN_PORT=$(STANDIN_PORT) \
		ASYNCH_ALLOWED_MODEL_HOSTS=$${ASYNCH_ALLOWED_MODEL_HOSTS:-127.0.0.1} \
		LOG_LEVELS=$${LOG_LEVELS:-$(QUIET_LOGGERS)} \
		CREDENTIAL_DEV_KEY_WARNING=$${CREDENTIAL_DEV_KEY_WARNING:-false} \
		ALLOW_REGISTRATION=$${ALLOW_REGISTRATION:-true}; \
	procs="web worker beat runtime"; standin=""; \
	if [ -z "$$PLATFORM_DEEPSEEK_API_KEY" ] && ! grep -qs '^PLATFORM_DEEPSEEK_API_KEY=..*' .env; then \
		standin=http://127.0.0.1:$(STANDIN_PORT); procs="$$procs standin"; \
		export PLATFORM_DEEPSEEK_API_KEY=sk-standin-placeholder DEEPSEEK_BASE_URL=$$standin; \
	fi; \
	$(BIN)/python manage.py migrate --noinput -v0 && \
	$(BIN)/python manage.py collectstatic --noinput -v0 && \
	$(BIN)/python manage.py dev_bootstrap --username $(DEV_ADMIN_USER) --password $(DEV_ADMIN_PASSWORD) \
		--demo-username $(DEV_DEMO_USER) --demo-password $(DEV_DEMO_PASSWORD) --tenant-key $(DEV_TENANT_KEY) \
		--standin-url "$$standin" --port $(RUN_PORT) && \
	rm -rf $${VAR_DIR:-var}/metrics; \
	command -v jq >/dev/null || echo "(the quick start needs jq: apt-get install jq, or brew install jq)"; \
	echo; exec $(BIN)/honcho start -f Procfile.dev $$procs

# The whole suite on PostgreSQL and Redis, then the tests marked `embedded` again on
# SQLite with no Redis: the database `make run` uses must run the same state machine.
# The suite runs with DEBUG false; its test-only SECRET_KEY and CREDENTIAL_ENCRYPTION_KEYS
# come from tests/environment.py (a pytest plugin), so a bare .venv/bin/pytest has them too.
test: venv messages browser node pgbouncer prometheus
	DATABASE_URL=$${DATABASE_URL:-$(TEST_DATABASE_URL)} REDIS_URL=$${REDIS_URL:-$(TEST_REDIS_URL)} \
	CELERY_BROKER_URL=$${CELERY_BROKER_URL:-memory://} \
	$(BIN)/pytest $(XDIST) $(PYTEST_ARGS)
	@if [ -z "$(PYTEST_ARGS)" ]; then \
	  echo "--- embedded default (SQLite, no Redis) ---"; \
	  rm -rf $(CURDIR)/var/test-metrics; \
	  env -u REDIS_URL -u METRICS_REDIS_URL DATABASE_URL=sqlite:///$(CURDIR)/var/test-embedded.sqlite3 CELERY_BROKER_URL=memory:// \
	  PROMETHEUS_MULTIPROC_DIR=$(CURDIR)/var/test-metrics \
	  $(BIN)/pytest $(XDIST) -m embedded -q -p no:cacheprovider; \
	fi

lint: venv
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

# The documentation site (mkdocs.yml, docs/) into var/site, in strict mode: a broken link or
# anchor fails it. make test builds it too (tests/test_docs.py).
# The site works opened from disk (mkdocs.yml's offline plugin: no server, no network, search
# included). docs-serve rebuilds it as you write, on a port of its own (make run has RUN_PORT).
DOCS_PORT ?= 8001
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet -d var/site
	@echo "The manual: open $(CURDIR)/var/site/index.html (from disk, no server needed), or make docs-serve"

docs-serve: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

bench: venv
	$(BIN)/python -m bench.bench_lifecycle

clean:
	rm -rf var .pytest_cache
