# syntax=docker/dockerfile:1
# driftgauge container image: `docker build -t driftgauge .`
# Run: docker run -v "$PWD/config.yml:/etc/driftgauge/config.yml:ro" -p 8080:8080 driftgauge

# Every stage starts from BASE_IMAGE. A tag moves when it is rebuilt upstream; a release
# build pins the image it was tested on by digest (docs/deploy.md, "Pin the base image"):
#   docker build --build-arg BASE_IMAGE=python:3.11-slim-bookworm@sha256:<digest> .
ARG BASE_IMAGE=python:3.11-slim-bookworm

# --- deps: wheels of exactly the locked dependencies, hashes checked ---------------------
# Only requirements.lock is copied, so this stage (and the runtime layer installing it) is
# rebuilt when the lock changes, not when the code does.
FROM ${BASE_IMAGE} AS deps
WORKDIR /src
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements.lock ./
RUN pip wheel --require-hashes --wheel-dir /wheels -r requirements.lock

# --- build: the driftgauge wheel alone (its dependencies come from the lock) -------------
FROM ${BASE_IMAGE} AS build
WORKDIR /src
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY pyproject.toml README.md ./
COPY service ./service
RUN pip wheel --no-deps --wheel-dir /wheels .

# --- runtime: no compiler, no source tree, no root -------------------------------------
FROM ${BASE_IMAGE} AS runtime
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN groupadd --system --gid 10001 driftgauge \
 && useradd --system --uid 10001 --gid driftgauge --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin driftgauge
# Layer 1, the dependencies: cached until requirements.lock changes.
RUN --mount=type=bind,from=deps,source=/wheels,target=/wheels \
    pip install --no-index --no-deps /wheels/*.whl
# Layer 2, the code: --no-deps, so nothing outside the lock is ever resolved.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --no-deps /wheels/driftgauge-*.whl \
 && pip check
# The config is mounted here from outside (volume, ConfigMap); the image ships none.
RUN mkdir -p /etc/driftgauge
USER 10001:10001
EXPOSE 8080
# `serve` listens on DRIFTGAUGE_PORT unless --port says otherwise, and the healthcheck asks
# the same port: `docker run -e DRIFTGAUGE_PORT=9000 -p 9000:9000` moves both.
ENV DRIFTGAUGE_PORT=8080
# /healthz makes no store calls: it only says the process serves requests.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ['DRIFTGAUGE_PORT'], timeout=4).status == 200 else 1)"]
ENTRYPOINT ["driftgauge"]
CMD ["serve", "--config", "/etc/driftgauge/config.yml"]
