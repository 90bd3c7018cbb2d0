#!/usr/bin/env bash
# Before/after in one run: each bench on a git ref and on this working tree, taking turns, so
# both sides see the same machine load (these machines are shared and noisy).
#
#   bash bench/before_after.sh REF [TURNS] [BENCH ...]
#   AFTER=REF2 bash bench/before_after.sh REF ...   (after = another ref, not the working tree)
#
# BENCH: queue workers fanout soak batch (default: the first four, in their quick sizes below;
# FANOUT_ARGS passes options to bench.fanout, e.g. "--viewers 1000 --repeat 1"). TURNS: how
# many times each side runs each bench (default 2: before, after, before, after). The ref is
# checked out in a temporary git worktree and run with this tree's .venv (the same installed
# dependencies); every bench prints its own ratios against its peers or raw ceiling, so compare
# those ratios line by line: absolute figures move with the load, ratios much less.
set -euo pipefail

ref=${1:?usage: bench/before_after.sh REF [TURNS] [BENCH ...]}
turns=${2:-2}
shift $(( $# >= 2 ? 2 : 1 ))
benches=("$@")
[ ${#benches[@]} -gt 0 ] || benches=(queue workers fanout soak)

here=$(cd "$(dirname "$0")/.." && pwd)
python=$here/.venv/bin/python
before=$(mktemp -d)/before
trap 'git -C "$here" worktree remove --force "$before" >/dev/null 2>&1 || true' EXIT
git -C "$here" worktree add --detach -q "$before" "$ref"
after=$here
if [ -n "${AFTER:-}" ]; then
    after=$(dirname "$before")/after
    git -C "$here" worktree add --detach -q "$after" "$AFTER"
    trap 'git -C "$here" worktree remove --force "$before" >/dev/null 2>&1 || true
          git -C "$here" worktree remove --force "$after" >/dev/null 2>&1 || true' EXIT
fi

run() {  # run TREE BENCH
    local tree=$1 bench=$2
    (
        cd "$tree"
        export PYTHONPATH=$tree
        case $bench in
            queue) "$python" bench/queue.py --quick ;;
            workers) "$python" bench/workers.py --jobs 32 --tokens 300 --repeat 2 ;;
            fanout) "$python" -m bench.fanout ${FANOUT_ARGS:-} ;;
            soak) "$python" bench/soak.py --jobs 300 --timeout 300 ;;
            batch) "$python" -m bench.batch --items 1000 --rounds 2 ;;
            *) echo "unknown bench $bench" >&2; return 2 ;;
        esac
    )
}

for bench in "${benches[@]}"; do
    for turn in $(seq "$turns"); do
        for side in before after; do
            tree=$after
            [ "$side" = before ] && tree=$before
            echo "=================== $bench, $side ($( [ "$side" = before ] && echo "$ref" || echo "${AFTER:-working tree}" )), turn $turn"
            run "$tree" "$bench" || echo "!! $bench ($side) exited $?"
        done
    done
done
