# scripts/lib/setup.sh — installs what Cairn needs on a Debian machine, once. Sourced by
# scripts/demo and scripts/test; every function is a fast no-op when its part is present.

# Runs a command as root: directly when we are root, else through sudo.
_cairn_as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# HOME unset (a cron job, a systemd unit without User=): the user's home from passwd, for swift's
# caches, the model's and the venv's folders, and the programs the scripts start (as cairnd and
# cairn-server find it themselves).
export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"

# Loopback servers (the demo's, the tests') must not go through a proxy the environment names.
export no_proxy="127.0.0.1,localhost,::1${no_proxy:+,$no_proxy}"
export NO_PROXY="$no_proxy"

# The Debian packages: the four C libraries Cairn links (SQLite with FTS5, libcurl, zlib,
# OpenBLAS), pkg-config, nginx and curl (tests serve repositories with nginx and query the
# socket with curl), openssl (the private-repository tests make their certificates), rsync (the
# publish benchmark), and Python with venv (the reference model).
cairn_install_system_packages() {
    # Debian's python3 always: tests run /usr/bin/python3, whatever python3 comes first on PATH.
    local wanted=(libsqlite3-dev libcurl4-openssl-dev zlib1g-dev libopenblas-dev pkg-config nginx curl openssl rsync python3)
    # `venv --help` answers without python3-venv; creating one needs ensurepip, which it brings.
    python3 -c 'import ensurepip' >/dev/null 2>&1 || wanted+=(python3-venv)
    python3 -m pip --version >/dev/null 2>&1 || wanted+=(python3-pip)
    cairn_install_packages "${wanted[@]}"
}

# Installs those of the Debian packages named that are missing (as root, or through sudo).
cairn_install_packages() {
    local missing=() package
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
        echo "setup: not root and no sudo: install these Debian packages as root, then run this again: ${missing[*]}" >&2
        return 1
    fi
    echo "setup: installing ${missing[*]}" >&2
    # Through env: sudo's env_reset would drop a DEBIAN_FRONTEND set before it. A fresh machine's
    # unattended upgrades may hold apt's lock for minutes: waited for, not failed on.
    local lock=(-o DPkg::Lock::Timeout=600)
    _cairn_as_root env DEBIAN_FRONTEND=noninteractive apt-get "${lock[@]}" update -qq >&2 \
        || { echo "setup: apt-get update failed (above); fix apt, then run this again" >&2; return 1; }
    _cairn_as_root env DEBIAN_FRONTEND=noninteractive apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" >&2 \
        || { echo "setup: installing ${missing[*]} failed (above); fix apt, then run this again" >&2; return 1; }
    # Debian starts nginx on :80 and enables it at boot; the tests run their own, so one this
    # installed is stopped and left disabled.
    if [[ " ${missing[*]} " == *" nginx "* ]]; then
        _cairn_as_root systemctl disable --now nginx >/dev/null 2>&1 \
            || _cairn_as_root service nginx stop >/dev/null 2>&1 || true
    fi
}
