#!/usr/bin/env bash
# Build the fleetwatch OCI image with podman, without network during the build: for
# machines that reach no image registry and whose containers reach no package index.
# Elsewhere `docker build .` or `podman build -f Containerfile .` is all it takes.
#
#   bash scripts/build-image.sh [TAG]        # default TAG: localhost/fleetwatch:VERSION
#
# The base image is a Debian bookworm made here with debootstrap (python3, venv, CA
# certificates) unless BASE_IMAGE names one you have (e.g. python:3.11-slim-bookworm
# pulled from your registry). Wheels of fleetwatch's dependencies are gathered on this
# machine into wheelhouse/, which the Dockerfile installs from with --no-index when the
# build context has one, so the build itself runs with --network=none. Needs: podman,
# runc, debootstrap (as root).
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
tag=${1:-localhost/fleetwatch:$version}  # the tag deploy/kubernetes names
base=${BASE_IMAGE:-localhost/fleetwatch-base:bookworm}
work=${FLEETWATCH_IMAGE_WORK:-/var/tmp/fleetwatch-image}
mkdir -p "$work"

# podman on these machines: runc (crun fails on their cgroups) and no default ulimits.
export CONTAINERS_CONF="$work/containers.conf"
printf '[containers]\ndefault_ulimits = []\n' > "$CONTAINERS_CONF"
podman=(podman --runtime /usr/sbin/runc --cgroup-manager cgroupfs)

# One build at a time on this machine: podman's image store is the machine's, and the
# prune below removes every untagged image, a build stage of another checkout's build
# that runs at the same time included (its build then fails with "image not known").
exec 9>"${TMPDIR:-/tmp}/fleetwatch-build-image.lock"
flock 9

if ! "${podman[@]}" image exists "$base"; then
  if [ -n "${BASE_IMAGE:-}" ]; then
    echo "base image $base not found (pull it, or unset BASE_IMAGE to build one)" >&2
    exit 1
  fi
  mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
  mirror=${mirror:-http://deb.debian.org/debian}
  root="$work/rootfs"
  rm -rf "$root"
  echo "building the base image $base with debootstrap from $mirror (about a minute)" >&2
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
  tar -C "$root" -c . | "${podman[@]}" import - "$base" >/dev/null
  rm -rf "$root"
fi

# The wheelhouse is part of the build context (see .dockerignore); rebuilt every time so
# it matches pyproject.toml, and removed afterwards: a later `docker build .` in this
# checkout would otherwise take these wheels instead of the package index's.
rm -rf wheelhouse
trap 'rm -rf wheelhouse' EXIT
# The dependencies named in pyproject.toml, not `pip wheel .`: that would build fleetwatch
# in the checkout (build/, fleetwatch.egg-info), and the image builds its own from the
# source it copies anyway.
python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
  > "$work/requirements.txt"
python3 -m pip wheel --quiet --disable-pip-version-check -w wheelhouse \
  -r "$work/requirements.txt" "setuptools>=77" wheel

"${podman[@]}" build --network=none --quiet \
  --build-arg BASE_IMAGE="$base" \
  --build-arg REVISION="$(git describe --always --dirty 2>/dev/null || echo unknown)" \
  -f Containerfile -t "$tag" . >/dev/null
# The build stage and any image the new tag replaced are left untagged: remove them, or
# every build keeps a few hundred MB.
"${podman[@]}" image prune --force >/dev/null
echo "$tag"
