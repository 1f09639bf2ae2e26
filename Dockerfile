# meowbot: `docker build -t meowbot .`, `docker run --env-file .env -p 3000:3000 meowbot`
# The same bot as `make run`: `pip install .` of pyproject.toml's own dependencies (no test
# extras), run as `meowbot run` by a non-root user. docs/deploy.md says what was checked here.
#
# Python 3.11, the oldest pyproject.toml's requires-python allows (mypy's python_version). Debian
# 12 (bookworm) for both stages: the interpreter the build stage installs for must be the final
# stage's, and bookworm's slurm-client is Slurm 22.05, the release whose REST API cannot drain.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
# Every top-level package of [tool.setuptools.packages.find] (tests/unit/test_dockerfile.py).
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY handlers ./handlers
# Not editable: the files land in /install (byte-compiled), nothing points back at /src.
RUN pip install --no-cache-dir --disable-pip-version-check --prefix=/install .

FROM ${PYTHON_IMAGE}
# MPLCONFIGDIR: matplotlib's font cache (the charts) in /tmp, the one place a read-only root
# filesystem leaves writable (an emptyDir in the Kubernetes manifests); nothing else is written.
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 MPLCONFIGDIR=/tmp/matplotlib PORT=3000
# scontrol: Slurm 22.05's REST API cannot drain nodes, so meowbot falls back to it (mount the
# cluster's slurm.conf and set SLURM_CONF, and munge's socket directory /run/munge unless
# slurm.conf has AuthAltTypes=auth/jwt). Build with --build-arg SCONTROL=0 to leave it out.
ARG SCONTROL=1
RUN if [ "$SCONTROL" = "1" ]; then \
      apt-get update \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-client \
      && rm -rf /var/lib/apt/lists/*; \
    fi
COPY --from=build /install /usr/local
RUN groupadd --system --gid 10001 meowbot \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin meowbot
# Numeric, so that Kubernetes' runAsNonRoot can see it is not root.
USER 10001:10001
EXPOSE 3000
# /healthz answers 503 when Redis cannot be reached.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD python -c "import os, urllib.request; urllib.request.urlopen(f'http://127.0.0.1:{os.environ.get(\"PORT\", \"3000\")}/healthz', timeout=4)"
# SIGTERM lets in-flight work finish (10 s), hands over what did not (up to 10 s more) and stops
# the background loops (up to 10 s): stop it with `docker stop -t 35` (`--stop-timeout 35`).
STOPSIGNAL SIGTERM
ENTRYPOINT ["meowbot"]
CMD ["run"]
