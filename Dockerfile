# HomeAgent daemon image. Build: docker build -t homeagent .   Run: see compose.yaml and docs/SERVICE.md.
# Two stages: the wheel (with the compiled document-query kernels) is built with a compiler;
# the runtime image has none, runs as an unprivileged user and keeps everything in /data.

FROM python:3.11-slim-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml hatch_build.py README.md ./
COPY adapters adapters
COPY homeagent_sdk homeagent_sdk
COPY homeagent_core homeagent_core
COPY hmapdev hmapdev
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim-bookworm
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOMEAGENT_HOME=/data
ARG EXTRAS=web,postgres
COPY --from=build /wheels /wheels
RUN set -eux; \
    wheel="$(ls /wheels/homeagent-*.whl)"; \
    pip install "${wheel}[${EXTRAS}]"; \
    rm -rf /wheels; \
    useradd --system --create-home --uid 10001 --home-dir /home/homeagent homeagent; \
    install -d -m 0700 -o homeagent -g homeagent /data
USER homeagent
WORKDIR /home/homeagent
VOLUME ["/data"]
EXPOSE 8080
# /login answers without a session: the web server is up.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/login', timeout=4).status == 200 else 1)"]
# Inside the container the web UI listens on every interface of the container's own network;
# compose.yaml publishes it on the host's 127.0.0.1 only. Put a TLS reverse proxy in front for anything else.
ENTRYPOINT ["homeagent"]
CMD ["serve", "--data", "/data", "--host", "0.0.0.0", "--port", "8080"]
