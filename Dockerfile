# syntax=docker/dockerfile:1
# driftgauge container image: `docker build -t driftgauge .`
# Run: docker run -v "$PWD/config.yml:/etc/driftgauge/config.yml:ro" -p 8080:8080 driftgauge

# --- build: the driftgauge wheel and wheels of every dependency -------------------------
FROM python:3.11-slim AS build
WORKDIR /src
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY pyproject.toml README.md ./
COPY service ./service
RUN pip wheel --wheel-dir /wheels .

# --- runtime: no compiler, no source tree, no root -------------------------------------
FROM python:3.11-slim AS runtime
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN groupadd --system --gid 10001 driftgauge \
 && useradd --system --uid 10001 --gid driftgauge --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin driftgauge
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels driftgauge
# The config is mounted here from outside (volume, ConfigMap); the image ships none.
RUN mkdir -p /etc/driftgauge
USER 10001:10001
EXPOSE 8080
# /healthz makes no store calls: it only says the process serves requests.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4).status == 200 else 1)"]
ENTRYPOINT ["driftgauge"]
CMD ["serve", "--config", "/etc/driftgauge/config.yml"]
