# bench/mpi_bench_shared.sh: what bench/compare_mpi.sh and
# bench/mpi_layer_speed.sh share, sourced by both: sizes as they take them
# (--sizes) and print them, the awk functions that read their JSON lines,
# and the start of a run.

# A run's files: OUT made absolute, RAW=$OUT/$1.jsonl and LOG=$OUT/$1.log
# emptied, WORK a fresh folder ($2.XXXXXX) removed on exit, START_LOAD the
# load average now.
start_run() {
  mkdir -p "$OUT"
  OUT="$(cd "$OUT" && pwd)" RAW="$OUT/$1.jsonl" LOG="$OUT/$1.log"
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/$2.XXXXXX")"
  trap 'rm -rf "$WORK"' EXIT
  : >"$RAW"; : >"$LOG"
  START_LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
}

# "8", "4K", "1M", "1G" -> bytes; empty on error.
size_bytes() {
  case "$1" in
    *[kK]) [[ "${1%?}" =~ ^[0-9]+$ ]] && echo $(( ${1%?} << 10 )) ;;
    *[mM]) [[ "${1%?}" =~ ^[0-9]+$ ]] && echo $(( ${1%?} << 20 )) ;;
    *[gG]) [[ "${1%?}" =~ ^[0-9]+$ ]] && echo $(( ${1%?} << 30 )) ;;
    *) [[ "$1" =~ ^[0-9]+$ ]] && echo "$1" ;;
  esac
  return 0
}

# SIZES (8,1K,4M or LO:HI powers of two) -> BYTES, an array of byte counts;
# a bad item exits 2 with a message that starts with $1, the script's name.
expand_sizes() {
  BYTES=()
  local item lo hi
  for item in ${SIZES//,/ }; do
    lo=$(size_bytes "${item%%:*}") hi=$(size_bytes "${item##*:}")
    if [ -z "$lo" ] || [ -z "$hi" ] || [ "$lo" -lt 1 ] || [ "$lo" -gt "$hi" ] || [ "$hi" -gt $((1 << 30)) ]; then
      echo "$1: --sizes: '$item' is not a size (1..1G, suffix K/M/G) or range LO:HI" >&2
      exit 2
    fi
    for ((; lo <= hi; lo *= 2)); do BYTES+=("$lo"); done
  done
}

# 8, 1K, 4M: how carflow prints sizes.
human_bytes() {
  if [ "$1" -ge $((1 << 20)) ] && [ $(($1 % (1 << 20))) -eq 0 ]; then echo "$(($1 >> 20))M"
  elif [ "$1" -ge 1024 ] && [ $(($1 % 1024)) -eq 0 ]; then echo "$(($1 >> 10))K"
  else echo "$1"; fi
}

# awk functions, put before a program's own text: field(line, key) is a
# JSON line's value of key ("" when absent), human(b) a size as
# human_bytes prints it, us(x) a time in us to 3-4 figures ("-" when "").
JSON_AWK='
    function field(line, key,   v) {
      if (!match(line, "\"" key "\":(\"[^\"]*\"|[^,}]*)")) return ""
      v = substr(line, RSTART + length(key) + 3, RLENGTH - length(key) - 3)
      gsub(/"/, "", v)
      return v
    }
    function human(b) {
      if (b >= 1048576 && b % 1048576 == 0) return (b / 1048576) "M"
      if (b >= 1024 && b % 1024 == 0) return (b / 1024) "K"
      return b
    }
    function us(x) { return x == "" ? "-" : sprintf(x < 10 ? "%.2f" : x < 1000 ? "%.1f" : "%.0f", x) }
'

# For a figure of one panel per collective of COLL_LIST: 1 without gnuplot
# (said on stderr, starting with $1); else PLOT_COLUMNS and PLOT_ROWS of
# the grid and PLOT_TICS, gnuplot's x tics for BYTES ("'1K' 1024").
plot_grid() {
  command -v gnuplot >/dev/null || { echo "$1: gnuplot not found: no plot (Debian: apt-get install gnuplot-nox)" >&2; return 1; }
  local b
  PLOT_TICS=()
  for b in "${BYTES[@]}"; do PLOT_TICS+=("'$(human_bytes "$b")' $b"); done
  PLOT_COLUMNS=3
  [ ${#COLL_LIST[@]} -ge 3 ] || PLOT_COLUMNS=${#COLL_LIST[@]}
  PLOT_ROWS=$(( (${#COLL_LIST[@]} + PLOT_COLUMNS - 1) / PLOT_COLUMNS ))
}
