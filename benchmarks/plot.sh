#!/usr/bin/env bash
# Bus bandwidth (or time) against message size from perf-tool outputs in the nccl-tests format: Tutti's
# tests/perf tools, nccl-tests itself, benchmarks/mpi/mpi_coll_perf and the raw files of side_by_side.sh.
# One line per input (system / transport / algorithm / protocol), log2 x axis. Needs gnuplot (Debian:
# gnuplot-nox, installed by scripts/install-deps.sh).
#
# usage: benchmarks/plot.sh [-o OUT] [-t TITLE] [-y busbw|algbw|time] [-i] [LABEL=]FILE ...
#   FILE     a perf tool's output; "-" reads standard input. A file may hold several runs (side_by_side.sh
#            repeats sweeps): per size the best row is kept (highest bandwidth, lowest time).
#   LABEL=   the line's name; default: the file name, plus NCCL_ALGO / NCCL_PROTO from the "# env:" line.
#   -o OUT   OUT.svg and OUT.png, or only the one format when OUT ends in .svg or .png (default: plot)
#   -y       what to plot (default busbw, GB/s); -i uses the in-place columns instead of out-of-place
# examples:
#   build/bin/all_reduce_perf -g 4 -b 8 -e 64M | benchmarks/plot.sh -o allreduce -t "AllReduce, 4 ranks" -
#   benchmarks/plot.sh -o ar-np4 benchmarks/results/raw/{tutti,ompi}-*-allreduce-np4.txt
#   NCCL_ALGO=ring NCCL_PROTO=ll all_reduce_perf -g 2 > ll.txt; ... ; benchmarks/plot.sh ll.txt simple.txt
set -euo pipefail

die() { echo "plot.sh: $*" >&2; exit 1; }

out=plot title="" metric=busbw inplace=0
while getopts "o:t:y:ih" opt; do
  case $opt in
    o) out=$OPTARG ;;
    t) title=$OPTARG ;;
    y) metric=$OPTARG ;;
    i) inplace=1 ;;
    h) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option (see -h)" ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || die "no input files (see -h); use - for standard input"
command -v gnuplot > /dev/null || die "gnuplot is not installed: apt-get install gnuplot-nox (or run scripts/install-deps.sh)"
case $metric in
  time) col=6 ylabel="time per call (us)" logy="set logscale y 10" ;;
  algbw) col=7 ylabel="algorithm bandwidth (GB/s)" logy="" ;;
  busbw) col=8 ylabel="bus bandwidth (GB/s)" logy="" ;;
  *) die "-y must be busbw, algbw or time, not '$metric'" ;;
esac
[ "$inplace" = 1 ] && col=$((col + 4))
case $out in
  *.svg) outputs=("$out") ;;
  *.png) outputs=("$out") ;;
  *) outputs=("$out.svg" "$out.png") ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One data file per input: "size value", best row per size, sorted by size.
plots=()
n=0
for arg in "$@"; do
  label="" file=$arg
  if [[ $arg == *=* && ! -e $arg ]]; then label=${arg%%=*} file=${arg#*=}; fi
  if [ "$file" = - ]; then
    cat > "$work/stdin.txt"
    file=$work/stdin.txt
    [ -n "$label" ] || label=stdin
  fi
  [ -r "$file" ] || die "cannot read '$file'"
  if [ -z "$label" ]; then
    label=$(basename "$file" .txt)
    env_line=$(grep -m1 '^# env:' "$file" || true)
    extra=$(echo "$env_line" | grep -o 'NCCL_\(ALGO\|PROTO\)=[^ ]*' | sed 's/NCCL_//' | tr '\n' ' ' | sed 's/ $//' || true)
    [ -n "$extra" ] && label="$label ($extra)"
  fi
  n=$((n + 1))
  data=$work/$n.dat
  # Data rows: a size first, at least `col` columns, and a number (not N/A) in the chosen column. A row of no
  # element (count 0: an AllGather, ReduceScatter or AlltoAll of fewer bytes than ranks x the type's size) moves
  # nothing: its bandwidth is an artefact of dividing by a near-zero time, left out.
  awk -v col="$col" -v metric="$metric" '
    /^#/ || NF < col { next }
    $1 ~ /^[0-9]+$/ && $2 != "0" && $col ~ /^[0-9.]+$/ {
      v = $col + 0
      if (!($1 in best) || (metric == "time" ? v < best[$1] : v > best[$1])) best[$1] = v
    }
    END { for (s in best) print s, best[s] }' "$file" | sort -n > "$data"
  [ -s "$data" ] || die "'$file' has no data rows with a value in column $col (is it a perf tool's output?)"
  esc=${label//\"/\\\"}
  esc=${esc//_/\\\\_}
  plots+=("'$data' using 1:2 with linespoints title \"$esc\"")
done

plot_cmd=$(IFS=,; echo "${plots[*]}")
for o in "${outputs[@]}"; do
  case $o in
    *.svg) term="set terminal svg size 960,600 dynamic enhanced font 'Helvetica,12' background rgb 'white'" ;;
    *.png) term="set terminal png size 960,600 enhanced" ;;
  esac
  gnuplot <<GP || die "gnuplot failed writing $o"
$term
set output '$o'
set title "${title//\"/\\\"}"
set xlabel "message size (bytes)"
set ylabel "$ylabel"
set logscale x 2
$logy
set format x "%.0b%B"
set grid
set key top left
$( [ "$metric" = time ] || echo "set yrange [0:*]" )
plot $plot_cmd
GP
  echo "plot.sh: wrote $o" >&2
done
