# kept in a container: `docker build -t kept .` then
#   docker run -d --name kept -v kept-data:/data -p 127.0.0.1:8080:8080 \
#     --env-file kept.env kept
# Secrets (TELEGRAM_BOT_TOKEN, DISCORD_TOKEN, OPENAI_API_KEY) and settings
# (KEPT_CHANNELS__TELEGRAM__ENABLED=true, ...) come from the environment.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Only what the wheel is built from (see .dockerignore).
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY channels ./channels
COPY core ./core
COPY config ./config

# A venv of its own, installed (not editable) from the copied source.
RUN python -m venv /opt/kept \
    && /opt/kept/bin/pip install /src

# A non-root user owns the data volume, and nothing else.
RUN useradd --system --uid 10001 --user-group --home-dir /data --shell /usr/sbin/nologin kept \
    && mkdir -p /data \
    && chown kept:kept /data \
    && chmod 0700 /data

ENV PATH=/opt/kept/bin:$PATH \
    KEPT_STORAGE__URL=sqlite:////data/kept.sqlite \
    KEPT_HTTP__LISTEN=0.0.0.0:8080

USER kept
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8080

# /healthz answers while the process runs (bot/http.py); /readyz is for a
# load balancer or an orchestrator's readiness probe.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]

# SIGTERM (docker stop) stops kept in order; give it more than
# shutdown.graceSeconds: `docker stop --time 30`.
STOPSIGNAL SIGTERM
# Docker has no umask setting: the entrypoint sets it, then execs the command
# (any `docker run kept kept ...` too), so every file kept writes under /data
# is readable by kept alone; exec keeps kept as PID 1, receiving SIGTERM.
ENTRYPOINT ["/bin/sh", "-c", "umask 0077 && exec \"$@\"", "kept"]
CMD ["kept", "run"]
