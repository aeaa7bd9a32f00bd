# scripts/lib/python-env.sh — shared Python venv for Cairn's reference/bench scripts.
#
# Source it, then call `cairn_venv PKG==VER ...`:
#     . scripts/lib/python-env.sh
#     cairn_venv numpy==2.4.6 tokenizers==0.23.3 onnxruntime==1.31.1
#     "$CAIRN_PYTHON" Tests/Reference/embed_ref.py --self-check
#
# Creates (once) a venv at ${CAIRN_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/cairn/venv},
# pip-installs only the pins not already present at that exact version, and exports
# CAIRN_PYTHON (the venv's python). A stamp file (a `pip freeze` taken after each
# install) makes a repeat call a no-op that runs no pip. Quiet unless something fails.
# Verified pins (Python 3.11, x86_64): numpy==2.4.6 tokenizers==0.23.3 onnxruntime==1.31.1
# "moto[server]==5.2.5" awscli==1.46.2 (extras in brackets are ignored by the stamp check).

_cairn_norm() {  # PEP 503 name normalisation of "name==ver" lines: lower case, [-_.]+ -> -
    awk -F'==' 'NF == 2 { n = tolower($1); sub(/\[.*\]$/, "", n); gsub(/[-_.]+/, "-", n); print n "==" $2 }'
}

# Prints the pins ($@) that the stamp does not list.
_cairn_missing() {
    local stamp=$1; shift
    local pin
    for pin in "$@"; do
        grep -qxF -- "$(printf '%s\n' "$pin" | _cairn_norm)" "$stamp" 2>/dev/null || printf '%s\n' "$pin"
    done
}

cairn_venv() {
    # HOME unset (cron, a unit without User=): the user's home from passwd.
    local home="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
    local venv="${CAIRN_VENV:-${XDG_CACHE_HOME:-$home/.cache}/cairn/venv}"
    local py="$venv/bin/python" stamp="$venv/.cairn-freeze" log pin
    for pin in "$@"; do
        case $pin in *==*) ;; *) echo "cairn_venv: pin an exact version: $pin" >&2; return 2 ;; esac
    done
    # A venv an interrupted run left half-made (a python, no pip) is made again.
    if [ -x "$py" ] && ! "$py" -m pip --version >/dev/null 2>&1; then
        echo "cairn_venv: $venv has no working pip (an interrupted set-up?); making it again" >&2
        rm -rf "$venv"
    fi
    if [ ! -x "$py" ]; then
        mkdir -p "$(dirname "$venv")" || return 1
        log=$(python3 -m venv "$venv" 2>&1) || { printf '%s\n' "$log" >&2; echo "cairn_venv: python3 -m venv $venv failed" >&2; return 1; }
        rm -f "$stamp"
    fi
    local missing
    missing=$(_cairn_missing "$stamp" "$@")
    if [ -n "$missing" ]; then
        # The stamp may be stale or absent: check the real state before installing.
        "$py" -m pip freeze --disable-pip-version-check 2>/dev/null | _cairn_norm >"$stamp"
        missing=$(_cairn_missing "$stamp" "$@")
    fi
    if [ -n "$missing" ]; then
        # shellcheck disable=SC2086  # one pin per word
        log=$("$py" -m pip install --quiet --disable-pip-version-check $missing 2>&1) || {
            printf '%s\n' "$log" >&2
            echo "cairn_venv: pip install failed:" $missing >&2
            return 1
        }
        "$py" -m pip freeze --disable-pip-version-check 2>/dev/null | _cairn_norm >"$stamp"
        missing=$(_cairn_missing "$stamp" "$@")
        [ -z "$missing" ] || { echo "cairn_venv: still missing after install:" $missing >&2; return 1; }
    fi
    export CAIRN_PYTHON="$py"
}
