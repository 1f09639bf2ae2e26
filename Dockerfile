# meowbot: `docker build -t meowbot . && docker run --env-file .env -p 3000:3000 meowbot`
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY handlers ./handlers
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PORT=3000
# scontrol: Slurm 22.05's REST API cannot drain nodes, so meowbot falls back to it (mount the
# cluster's slurm.conf and set SLURM_CONF). Build with --build-arg SCONTROL=0 to leave it out.
ARG SCONTROL=1
RUN if [ "$SCONTROL" = "1" ]; then \
      apt-get update && apt-get install -y --no-install-recommends slurm-client \
      && rm -rf /var/lib/apt/lists/*; \
    fi
COPY --from=build /install /usr/local
RUN useradd --system --uid 10001 --no-create-home meowbot
USER meowbot
EXPOSE 3000
# /healthz answers 503 when Redis cannot be reached.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD python -c "import os, urllib.request; urllib.request.urlopen(f'http://127.0.0.1:{os.environ.get(\"PORT\", \"3000\")}/healthz', timeout=4)"
# SIGTERM lets in-flight work finish (up to 10 s); give it a little more.
STOPSIGNAL SIGTERM
ENTRYPOINT ["meowbot"]
CMD ["run"]
