# The image of the code-mode services (frontend, bridge, sandbox-runner) and
# of nats-server, for deploy/docker-compose.yml. Built by deploy/build.sh
# from binaries built on this machine: the build context holds only
# code-mode, code-mode-test-server and nats-server.
#
# BASE: debian:bookworm-slim with a registry; offline, build.sh passes the
# debootstrap base that `code-mode build-image` makes (code-mode-base:bookworm).
ARG BASE=debian:bookworm-slim
FROM ${BASE}
COPY code-mode code-mode-test-server nats-server /usr/local/bin/
# JetStream's store (a named volume in the compose file starts as a copy of
# this folder, owner included).
RUN mkdir -p /var/lib/code-mode-nats && chown 65534:65534 /var/lib/code-mode-nats
# Services run as nobody unless the compose file says otherwise (the
# sandbox-runner needs the Docker socket).
USER 65534:65534
ENTRYPOINT []
