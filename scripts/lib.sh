# SPDX-License-Identifier: GPL-2.0-or-later
# Common settings and helpers for the scripts in this folder.  Sourced, not run.
#
# Everything that is downloaded or built lives under $VSRIOV_CACHE, outside the
# source tree, so that a clean clone reuses it and a rebuild is incremental.

set -euo pipefail

VSRIOV_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VSRIOV_CACHE=${VSRIOV_CACHE:-/var/cache/vsriov}
export VSRIOV_SRC VSRIOV_CACHE

# Pinned upstream inputs.  Changing one of these is a deliberate act.
QEMU_DEB_VERSION=1:10.2.2+ds-1
QEMU_UPSTREAM_VERSION=10.2.2
QEMU_DSC_URL=http://deb.debian.org/debian/pool/main/q/qemu/qemu_10.2.2+ds-1.dsc
QEMU_DSC_SHA256=f1684b3aa5ec500c3389d346c6501dee45041ea91656c6556d4da9023b7987dd
GUEST_SUITE=trixie
GUEST_MIRROR=${GUEST_MIRROR:-http://deb.debian.org/debian}
GUEST_KVER=6.12.107+deb13-amd64
GUEST_KSRC_VERSION=6.12.107-1

VENV=$VSRIOV_CACHE/venv
QEMU_BUILD=$VSRIOV_CACHE/qemu-build
QEMU_BIN=$QEMU_BUILD/qemu-system-x86_64
QEMU_BUILD_ASAN=$VSRIOV_CACHE/qemu-build-asan
GUEST_DIR=$VSRIOV_CACHE/guest
TRIXIE_ROOT=$VSRIOV_CACHE/trixie
export QEMU_BUILD QEMU_BUILD_ASAN QEMU_BIN GUEST_DIR TRIXIE_ROOT GUEST_KVER

# Firmware comes from bookworm's packages (the +ds source has no blobs).
QEMU_FW_ARGS=(-L /usr/share/qemu -L /usr/share/seabios -L /usr/lib/ipxe/qemu)

log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
die() { printf '%s: error: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }

# Run "$@" under a deadline and a single clear failure line.
try() {
	local what=$1; shift
	"$@" || die "$what failed (command: $*)"
}

# Install Debian packages that are missing.  Only bookworm's own sources are
# used on the host: guest packages come through a debootstrap'd chroot.
apt_ensure() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "installing Debian packages: ${missing[*]}"
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; then
		DEBIAN_FRONTEND=noninteractive apt-get update >/dev/null ||
			die "apt-get update failed: is Debian's package registry reachable?"
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null ||
			die "apt-get install ${missing[*]} failed"
	fi
}

# Host packages every part needs; kept in one list so setup is one step.
HOST_PACKAGES=(
	build-essential pkg-config ninja-build python3 python3-venv python3-dev
	dpkg-dev curl ca-certificates xz-utils zstd cpio e2fsprogs debootstrap
	flex bison libglib2.0-dev libpixman-1-dev libslirp-dev zlib1g-dev
	libcap-ng-dev libattr1-dev libfdt-dev
	qemu-system-data seabios ipxe-qemu
	iproute2 iputils-ping procps psmisc kmod
	libnl-3-dev libnl-genl-3-dev libnl-route-3-dev libjson-glib-dev
	libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients
	qemu-system-x86
	clang-14 libclang-rt-14-dev
	openvswitch-common   # ovs-ofctl: OVS checks the daemon's OpenFlow encoder (unit tests)
	systemd              # systemd-socket-activate, systemd-analyze: the daemon's unit tests
	git                  # git am: the upstream plugins' series on their release trees (unit tests)
	lintian              # scripts/package checks the Debian packages it builds
)

# Python tools (meson for QEMU's configure and our build, pytest for tests)
# live in a venv so a fresh Debian 12 needs no pip --break-system-packages.
PY_REQUIREMENTS=("meson>=1.5,<1.10" "pytest>=7,<9")

venv_ensure() {
	local stamp=$VENV/.requirements req
	req=$(printf '%s\n' "${PY_REQUIREMENTS[@]}")
	if [ -x "$VENV/bin/python3" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$req" ]; then
		return 0
	fi
	log "creating Python venv in $VENV"
	/usr/bin/python3 -m venv "$VENV" || die "python3 -m venv $VENV failed"
	"$VENV/bin/pip" install -q --disable-pip-version-check "${PY_REQUIREMENTS[@]}" ||
		die "pip install ${PY_REQUIREMENTS[*]} failed: is PyPI reachable?"
	printf '%s\n' "$req" >"$stamp"
}

# Go for sriov-cni-patch/ and tests/cni-flow (whose netlink library needs Go
# >= 1.21; the upstream CNI and device plugin need 1.23): the Go project's
# own toolchain, pinned by version and checksum, from the Go module proxy
# (bookworm's golang-go is 1.19).  Never whatever go happens to be on PATH.
GO_VERSION=1.24.6
GO_ZIP_SHA256=e7f0fd16d1b06c716162a0938744bb7ebf7edbc3248d42432271a1b5c1fde1ce
GOPROXY_URL=${GOPROXY_URL:-https://proxy.golang.org}
GOROOT_PINNED=$VSRIOV_CACHE/go-$GO_VERSION

go_ensure() {
	local mod=golang.org/toolchain@v0.0.1-go$GO_VERSION.linux-amd64 zip
	if [ ! -x "$GOROOT_PINNED/bin/go" ]; then
		apt_ensure unzip
		zip=$VSRIOV_CACHE/go-$GO_VERSION.zip
		log "downloading Go $GO_VERSION from $GOPROXY_URL"
		curl -fsSL -o "$zip.tmp" "$GOPROXY_URL/golang.org/toolchain/@v/v0.0.1-go$GO_VERSION.linux-amd64.zip" ||
			die "cannot download Go $GO_VERSION from $GOPROXY_URL: is the Go module proxy reachable?"
		echo "$GO_ZIP_SHA256  $zip.tmp" | sha256sum -c --quiet ||
			die "Go $GO_VERSION: the download's checksum differs from the pinned $GO_ZIP_SHA256"
		rm -rf "$GOROOT_PINNED.tmp" "$GOROOT_PINNED"
		mkdir -p "$GOROOT_PINNED.tmp"
		unzip -q "$zip.tmp" -d "$GOROOT_PINNED.tmp" || die "cannot unpack $zip.tmp"
		mv "$GOROOT_PINNED.tmp/$mod" "$GOROOT_PINNED"
		rm -rf "$GOROOT_PINNED.tmp" "$zip.tmp"
	fi
	export PATH=$GOROOT_PINNED/bin:$PATH GOTOOLCHAIN=local
	unset GOROOT
	[ "$(go env GOVERSION)" = "go$GO_VERSION" ] || die "go on PATH is not the pinned go$GO_VERSION"
}

# Go tools and the Go build cache's contents that the unit suite's upstream
# plugin tests need (the releases' pinned golangci-lints, their
# dependencies compiled): minutes of CPU on a fresh machine.  Started in the
# background at nice 19, they take only what scripts/test's builds and first
# unit tests leave idle; the tests wait for them (harness/upstream.py's
# prebuild(); output in $VSRIOV_GOTOOLS/prebuild.log).  With everything
# built it takes a few seconds.  Needs the venv and go_ensure's Go.
VSRIOV_GOTOOLS=${VSRIOV_GOTOOLS:-$VSRIOV_CACHE/gotools}
export VSRIOV_GOTOOLS
gotools_prebuild() {
	mkdir -p "$VSRIOV_GOTOOLS"
	(cd "$VSRIOV_SRC/tests" && exec nice -n 19 "$VENV/bin/python3" -m harness.upstream prebuild) \
		</dev/null >"$VSRIOV_GOTOOLS/prebuild.log" 2>&1 &
}

# scripts/build-ours' build folder: under $VSRIOV_CACHE, keyed by the
# source path, so that several clones on one machine do not share one.
ours_build_dir() {
	echo "$VSRIOV_CACHE/build-ours-$(printf '%s' "$VSRIOV_SRC" | sha256sum | cut -c1-12)"
}

host_ensure() {
	[ "$(id -u)" -eq 0 ] || die "run as root (needs apt, network namespaces and chroot)"
	mkdir -p "$VSRIOV_CACHE"
	apt_ensure "${HOST_PACKAGES[@]}"
	venv_ensure
	export PATH=$VENV/bin:$PATH
}

# Build what a run needs: our code, QEMU (build-qemu's options in "$@") and,
# as $1 says, the guest artifacts (full), only the kernel source (source) or
# nothing (none).  The guest's first steps, debootstrap and the trixie
# packages, wait mostly on the network: they run beside QEMU's compile.
BUILD_GUEST_PID=
build_all() {
	local guest=$1
	shift
	VSRIOV_BUILD_OURS=$("$VSRIOV_SRC/scripts/build-ours")
	export VSRIOV_BUILD_OURS
	if [ "$guest" != none ]; then
		"$VSRIOV_SRC/scripts/build-guest" --source &
		BUILD_GUEST_PID=$!
		trap '[ -z "$BUILD_GUEST_PID" ] || kill "$BUILD_GUEST_PID" 2>/dev/null || true' EXIT
	fi
	"$VSRIOV_SRC/scripts/build-qemu" "$@"
	if [ -n "$BUILD_GUEST_PID" ]; then
		wait "$BUILD_GUEST_PID" || die "scripts/build-guest --source failed (its messages are above)"
		BUILD_GUEST_PID=
	fi
	if [ "$guest" = full ]; then
		"$VSRIOV_SRC/scripts/build-guest"
	fi
}
