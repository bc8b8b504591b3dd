# shellcheck shell=bash disable=SC2154
# Sourced by scripts/run.sh and scripts/osu.sh: what the two comparisons share
# besides the stacks (stacks.sh): messages, the checks of the options both
# take, the lines every env.txt starts with, and the load average. One
# definition, so both scripts refuse the same bad input with the same words.
#
# Needs: $harness_tag (the prefix of every message: run, osu), $start
# ($SECONDS at start). Functions:
#   log MSG...            progress line on stderr, with the seconds since start
#   die MSG...            error on stderr, exit 2
#   need_value OPT [VAL]  die unless OPT was given a non-empty value
#   in_range V LO HI      V is a whole number (at most 9 digits) in [LO, HI]
#   harness_check         checks $rounds, $max, $layout against $fabric, root
#                         for --fabric; normalizes rounds, max; defaults layout
#   harness_env           the env.txt lines both comparisons write first
#   loadavg               the 1/5/15-minute load as a/b/c

log() { printf '[%s %4ds] %s\n' "$harness_tag" "$((SECONDS - start))" "$*" >&2; }
die() { printf '[%s] error: %s\n' "$harness_tag" "$*" >&2; exit 2; }
need_value() { [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value (see --help)"; }
in_range() { [[ $1 =~ ^[0-9]{1,9}$ ]] && ((10#$1 >= $2 && 10#$1 <= $3)); }

harness_check() {
  in_range "$rounds" 1 100 || die "--rounds takes a whole number from 1 to 100, not '$rounds'"
  in_range "$max" 8 67108864 || die "--max takes a number of bytes from 8 to 67108864, not '$max'"
  rounds=$((10#$rounds)) max=$((10#$max))
  [[ -z $layout || $fabric == 1 ]] || die "--layout applies to --fabric only (this host runs 4 ranks)"
  layout=${layout:-2x2}
  ((fabric == 0 || $(id -u) == 0)) || die "--fabric needs root (network namespaces)"
}

harness_env() {
  echo "mode=$mode"
  echo "layout=$([[ $fabric == 1 ]] && echo "$layout" || echo local)"
  echo "layout_text=$layout_text"
  echo "rounds=$rounds"
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host=$(hostname)"
  echo "cores=$(nproc)"
  echo "kernel=$(uname -r)"
  echo "openmpi=$(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}')"
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg | tr ' ' /; }
