# fleetwatch as an OCI image: one file for docker and podman (Containerfile links here).
#
#   docker build -t fleetwatch .                      # base image and wheels from the network
#   podman build -t fleetwatch -f Containerfile .     # the same
#   bash scripts/build-image.sh                       # offline: debootstrap base, host wheels
#
# Two stages: the first builds fleetwatch's wheel and gathers its dependencies' wheels,
# from wheelhouse/ when the build context has one (scripts/build-image.sh fills it on the
# host, so that build runs without network) and from the package index otherwise; the
# second installs them into a virtualenv and carries no compiler, no pip and no source
# tree. The process runs as a numeric non-root user, so Kubernetes' runAsNonRoot can
# verify it without reading /etc/passwd.
ARG BASE_IMAGE=docker.io/library/python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
# Extra options for pip, e.g. "--index-url https://pypi.example.com/simple" (a private
# index) or "--cert /path/ca.pem" (a proxy that re-signs TLS; mount the file at build time).
ARG PIP_OPTIONS=""
WORKDIR /src
# .dockerignore lets in only what the wheel needs (and wheelhouse/, when there is one):
# copying the whole context is what makes the wheelhouse optional.
COPY . .
RUN set -eu; \
    if ls wheelhouse/*.whl >/dev/null 2>&1; then \
      from="--no-index --find-links /src/wheelhouse"; echo "fleetwatch: wheels from wheelhouse/"; \
    else \
      from=""; echo "fleetwatch: wheels from the package index"; \
    fi; \
    python3 -m venv /build-venv; \
    /build-venv/bin/pip install --quiet --disable-pip-version-check $from ${PIP_OPTIONS} \
      --upgrade "setuptools>=77" wheel; \
    /build-venv/bin/pip wheel --quiet --disable-pip-version-check --no-build-isolation \
      $from ${PIP_OPTIONS} --wheel-dir /wheels .

FROM ${BASE_IMAGE}
COPY --from=build /wheels /wheels
RUN python3 -m venv /opt/fleetwatch \
 && /opt/fleetwatch/bin/pip install --quiet --disable-pip-version-check --no-cache-dir \
      --no-index --find-links /wheels fleetwatch \
 && /opt/fleetwatch/bin/pip uninstall --quiet --yes pip \
 && rm -rf /wheels \
 && mkdir -p /var/lib/fleetwatch && chown 65532:65532 /var/lib/fleetwatch
# The commit the image was built from: fleetwatch_build_info's revision label, --version
# and the image's revision label (`--build-arg REVISION=$(git describe --always --dirty)`).
ARG REVISION=unknown
LABEL org.opencontainers.image.title="fleetwatch" \
      org.opencontainers.image.description="Health of a fleet of Kubernetes clusters for Prometheus, and the webhook that gates deployments on it" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.revision="$REVISION"
ENV PATH=/opt/fleetwatch/bin:$PATH \
    FLEETWATCH_REVISION=$REVISION \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# The reactor's SQLite file (--db.path) lives here by default in the image; mount a volume.
WORKDIR /var/lib/fleetwatch
USER 65532:65532
# exporter, reactor
EXPOSE 9713 9714
ENTRYPOINT ["fleetwatch"]
CMD ["--help"]
