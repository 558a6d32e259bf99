# A sandbox image with packages: the default image (ARG IMAGE: Python and
# runner.py) plus the pinned Python packages of requirements.txt under
# /opt/code-mode/packages, the Debian packages of APT, and
# /opt/code-mode/packages.json naming every Python distribution added.
# `code-mode build-image --requirements FILE --apt PKG --wheels DIR` builds
# it (services/sandbox-runner/src/image/packages.rs); the legacy builder
# runs it, so no RUN --mount and no heredocs.
#
# Only the builder stage has pip and the host's CA bundle (pip needs it to
# reach the index through a TLS-inspecting proxy); the final stage copies
# the installed files out of it and nothing else.
ARG IMAGE

FROM ${IMAGE} AS builder
USER root
COPY list_packages.py /build/
# Debian package names (checked by code-mode against Debian's grammar).
ARG APT=""
# The Debian packages first, alone, so their Python distributions are
# named apart from pip's own.
RUN set -e; mkdir -p /opt/code-mode/packages; echo '{}' > /build/apt.json; \
    if [ -n "$APT" ]; then \
      apt-get update -q; \
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $APT; \
      python3 /build/list_packages.py /build/apt.json /usr/lib/python3/dist-packages; \
    fi
# pip, when there are requirements and the base lacks it (the debootstrap
# base): a step of its own, before the requirements, so every set of
# requirements reuses it and a failed install does not repeat it.
ARG NEED_PIP=""
RUN set -e; if [ -n "$NEED_PIP" ] && ! python3 -m pip --version >/dev/null 2>&1; then \
      ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1 || apt-get update -q; \
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-pip; \
    fi
# pip's source options: `--no-index --find-links /wheels` with --wheels,
# and `--cert` for the host's CA bundle.
ARG PIP_OPTIONS=""
COPY requirements.txt ca-certificates.crt /build/
COPY wheels/ /wheels/
RUN set -e; if [ -s /build/requirements.txt ]; then \
      python3 -m pip install --no-cache-dir --disable-pip-version-check --no-input --progress-bar off \
        --root-user-action=ignore --target /opt/code-mode/packages $PIP_OPTIONS -r /build/requirements.txt; \
      rm -rf /opt/code-mode/packages/bin; \
    fi
RUN python3 /build/list_packages.py /opt/code-mode/packages.json /opt/code-mode/packages --merge /build/apt.json

FROM ${IMAGE}
USER root
ARG APT=""
RUN set -e; if [ -n "$APT" ]; then \
      apt-get update -q; \
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $APT; \
      apt-get clean; \
      rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log; \
    fi
COPY --from=builder /opt/code-mode/packages /opt/code-mode/packages
COPY --from=builder /opt/code-mode/packages.json /opt/code-mode/packages.json
# Packages keep caches and settings under HOME (matplotlib's config dir,
# font caches): the user's /nonexistent is on the read-only root, /tmp is
# the sandbox's one writable place.
ENV HOME=/tmp
# As image/Dockerfile ends.
USER 65534:65534
WORKDIR /tmp
ENTRYPOINT ["python3", "-I", "/opt/code-mode/runner.py"]
