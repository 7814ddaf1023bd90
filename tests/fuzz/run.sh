#!/bin/sh
# tests/fuzz/run.sh BUILD SECONDS TARGET...: runs each libFuzzer program
# BUILD/bin/fuzz_TARGET for SECONDS over its corpus (docs/testing.md
# "Fuzzing") and prints per target the executions, the coverage of
# libFuzzer's last line (cov: edges, ft: features, corp: inputs) and the
# crashes. The repository's corpus, tests/fuzz/corpus/TARGET/, is read,
# never written: inputs found new go to BUILD/fuzz-corpus/TARGET/ (`make
# fuzz-merge` adds those that add coverage), crashing ones to
# BUILD/fuzz-crashes/TARGET/. Fails when any target crashed.
set -u
build=$1
seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
log_dir=$build/fuzz-logs
mkdir -p "$log_dir"
echo "fuzz: $seconds s per target; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-13s %8s %10s %9s %7s %7s %6s %8s\n' target seconds executions "exec/s" cov ft corp crashes
failed=0
for t in "$@"; do
  corpus=$here/corpus/$t
  found=$build/fuzz-corpus/$t
  crashes=$build/fuzz-crashes/$t
  log=$log_dir/$t.log
  mkdir -p "$corpus" "$found"
  rm -rf "$crashes"
  mkdir -p "$crashes"
  start=$(date +%s)
  # -timeout: one input taking 10 s is a hang; -rss_limit_mb: a leak or an
  # allocation a hostile input makes is a crash too.
  nice -n 5 "$build/bin/fuzz_$t" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$crashes/" \
    "$found" "$corpus" >"$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1)
  cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
  ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
  corp=$(echo "$last" | sed -n 's/.* corp: \([0-9]*\).*/\1/p')
  n=$(find "$crashes" -type f | wc -l)
  if [ "$rc" -ne 0 ] && [ "$n" -eq 0 ]; then n=1; fi
  printf '%-13s %8s %10s %9s %7s %7s %6s %8s\n' "$t" "$took" "${execs:-?}" \
    "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$n"
  if [ "$n" -ne 0 ]; then
    failed=1
    echo "fuzz: $t crashed (exit $rc): inputs in $crashes, log $log:"
    grep -E 'ERROR|fuzz target|runtime error|SUMMARY' "$log" | head -n 5
  fi
done
echo "fuzz: load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $failed
