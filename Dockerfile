# syntax=docker/dockerfile:1
# ragmon: multi-stage build. The builder makes a wheel and installs it with its dependencies into a virtualenv;
# the final image holds only that virtualenv and runs as a fixed non-root UID.

ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
RUN python -m venv /opt/ragmon
COPY pyproject.toml README.md ./
COPY ragmon ./ragmon
RUN /opt/ragmon/bin/pip install --no-cache-dir . \
    && /opt/ragmon/bin/ragmon --help > /dev/null

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="ragmon" \
      org.opencontainers.image.description="Production monitoring for retrieval-augmented generation" \
      org.opencontainers.image.source="https://github.com/ragmon/ragmon" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/ragmon/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    RAGMON_SERVER__HOST=0.0.0.0 \
    RAGMON_STORE__DSN=chdb:///var/lib/ragmon/clickhouse
RUN groupadd --system --gid 10001 ragmon \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/ragmon --create-home --shell /usr/sbin/nologin ragmon
COPY --from=builder /opt/ragmon /opt/ragmon
# smoke step: the installed entry point starts in the final image
RUN ragmon --help > /dev/null
USER 10001:10001
WORKDIR /var/lib/ragmon
EXPOSE 9108
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:9108/healthz', timeout=4).status == 200 else 1)"]
ENTRYPOINT ["ragmon"]
CMD ["run"]
