# The steps of the scale bench's corpus that `Benchmarks/bench-scale` and
# `Benchmarks/tools/delta-rounds` share: where the texts' vectors are kept, how each version is
# published, and waits on a device. Sourced after scripts/lib/python-env.sh (`cairn_venv`).

# scale_texts_cache MODEL_DIR: the texts' vectors of `cairn-bench make-corpus --cache`. They depend
# only on the collections and the model, so they are kept between runs.
scale_texts_cache() {
    local cache=${XDG_CACHE_HOME:-$HOME/.cache}/cairn/bench-scale
    mkdir -p "$cache"
    echo "$cache/texts-$(sha256sum "$1/model.safetensors" | cut -c1-16).sqlite"
}

# scale_publish BIN REPO KB KEYS MODEL_DIR CACHE VERSION [WRAPPER...]: publishes version VERSION
# (1 to 5) of the corpus in KB to channel `scale` of REPO, run under WRAPPER (e.g. `measure
# OUT.json`), then syncs the disk. Its deltas are of format $SCALE_DELTA_FORMAT (default 2). From version 3 on, two deltas are kept: each of them applies in place to
# the file of the version before the installed one, which the installed version's kept delta
# brings up to date first (the steady state).
scale_publish() {
    local bin=$1 repo=$2 kb=$3 keys=$4 model=$5 cache=$6 version=$7
    shift 7
    local suffix="" keep=1
    [ "$version" -eq 1 ] || suffix=-v$version
    [ "$version" -le 2 ] || keep=2
    "$@" "$bin/cairn-server" publish --repo "$repo" --channel scale --source "$kb/kb$suffix.jsonl" --vectors "$kb/vectors$suffix.npy" \
        --key "$keys/publisher.key" --model-dir "$model" --cache "$cache" --keep-deltas "$keep" --delta-format "${SCALE_DELTA_FORMAT:-2}"
    sync
}

# scale_probe KB: the chunk whose version `cairn-bench sync-time` asks for (version 2's first).
scale_probe() {
    "$CAIRN_PYTHON" -c 'import json, sys; print(json.loads(open(sys.argv[1]).readline())["id"])' "$1/kb-v2.jsonl"
}

wait_version() { # wait_version SOCKET VERSION SECONDS
    local deadline=$((SECONDS + $3))
    until curl -sf --unix-socket "$1" http://localhost/v1/status 2>/dev/null \
            | "$CAIRN_PYTHON" -c 'import json, sys; sys.exit(json.load(sys.stdin).get("version") != int(sys.argv[1]))' "$2" 2>/dev/null; do
        [ $SECONDS -lt $deadline ] || { echo "$(basename "$0"): version $2 not served on $1" >&2; exit 1; }
        sleep 0.2
    done
}
wait_spare() { # wait_spare LOG INDEX SECONDS: after a full install of an index of 256 MiB or more
    # (cairnd's spare_index_min_bytes), until cairnd has kept its spare copy for the next delta
    # (or said why not): that copy runs in the background, and the figures after it are taken alone.
    [ "$(stat -c %s "$2")" -ge $((256 << 20)) ] || return 0
    local deadline=$((SECONDS + $3))
    until grep -qE "kept a spare copy|no spare copy" "$1"; do
        [ $SECONDS -lt $deadline ] || { echo "$(basename "$0"): no spare copy in $1" >&2; exit 1; }
        sleep 0.2
    done
}
