# Prometheus for the compose stack's `monitoring` profile, built by
# deploy/build.sh from the prometheus binary on this machine (Debian's
# package) when no registry is at hand. With a registry, set
# CODE_MODE_PROMETHEUS_IMAGE=prom/prometheus instead.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
COPY prometheus /usr/local/bin/
# Its web UI's pages and libraries (build.sh copies Debian's), where
# Debian's binary reads them: the UI works with nothing from the network.
COPY web /usr/share/prometheus/web
# The TSDB (a named volume in the compose file starts as a copy of this
# folder, owner included).
RUN mkdir -p /prometheus && chown 65534:65534 /prometheus
USER 65534:65534
ENTRYPOINT []
