#!/usr/bin/env bash
# The plug-in path of an installed carflow, as a user walks it, outside
# Bazel: tools/install.sh into a fresh prefix; the example plug-in and
# tests/installed_plugin_check.c built with cc and the prefix's pkg-config
# file; the check run on 1 to 13 image threads and under the prefix's cfrun
# (-n 3 --images 2); the prefix's CLI listing and planning the plug-in's
# algorithms; bad plug-ins refused with a message naming them; the
# installed examples Makefile. Prints a table of steps; exits 1 naming the
# failed ones. It needs the real install (bazel build, then files outside
# the tree), so it is not a Bazel test: tools/carflow test runs it after
# bazel test //..., or run it alone: tests/installed_test.sh
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -n "${TEST_SRCDIR:-}" ]; then
  echo "installed_test: runs bazel itself; run it from the repository, not under bazel test" >&2
  exit 2
fi
# The steps set the CF_* variables they mean; none leaks in from the caller.
for v in $(compgen -e | grep '^CF_'); do unset "$v"; done

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
PREFIX="$TMP/prefix"
WORK="$TMP/work"
mkdir -p "$WORK"
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
PLUGIN="$WORK/libexample_plugin.so"
CHECK="$WORK/installed_plugin_check"
EXAMPLE_ALGOS=("broadcast example_binomial" "allreduce example_reduce_bcast" "gather_all example_ring")

declare -a SUMMARY=()
failed=()

# step NAME CMD...: runs CMD with its output in $WORK/NAME.log, shown
# only when it fails; records the result and time for the summary.
step() {
  local name="$1" start=$SECONDS status
  shift
  "$@" >"$WORK/$name.log" 2>&1
  status=$?
  if [ $status -eq 0 ]; then
    SUMMARY+=("$(printf '  PASS  %-22s %4ds' "$name" $((SECONDS - start)))")
  else
    SUMMARY+=("$(printf '  FAIL  %-22s %4ds  (status %d)' "$name" $((SECONDS - start)) $status)")
    failed+=("$name")
    echo "---- $name failed (status $status); its output:"
    tail -n 60 "$WORK/$name.log"
    echo "----"
  fi
  return $status
}

# fail MESSAGE: a step's own check failed.
fail() { echo "installed_test: $*"; return 1; }

finish() {
  echo "installed_test: prefix $PREFIX (removed on exit)"
  printf '%s\n' "${SUMMARY[@]}"
  if [ ${#failed[@]} -eq 0 ]; then
    echo "installed_test: all ${#SUMMARY[@]} steps passed in ${SECONDS}s"
    exit 0
  fi
  echo "installed_test: FAILED: ${failed[*]}"
  exit 1
}

install_prefix() { (cd "$ROOT" && timeout 1800 tools/install.sh "$PREFIX"); }

build_plugin() {
  pkg-config --exists carflow || fail "pkg-config does not find carflow in $PKG_CONFIG_PATH" || return 1
  cc -shared -fPIC -O2 -Wall -Wextra -Werror "$PREFIX/share/carflow/examples/example_plugin.c" \
    $(pkg-config --cflags carflow) -o "$PLUGIN"
}

build_check() {
  cc -O2 -Wall -Wextra -Werror "$ROOT/tests/installed_plugin_check.c" \
    $(pkg-config --cflags --libs carflow) -o "$CHECK" || return 1
  # The rpath from pkg-config binds the prefix's library, not another one.
  libs=$(ldd "$CHECK")
  # grep reads a variable, not a pipe: with pipefail, grep -q leaving early
  # can kill the writer with SIGPIPE and fail a test that matched.
  grep -qF "libcarflow.so => $PREFIX/lib/libcarflow.so" <<<"$libs" ||
    fail "$CHECK does not load $PREFIX/lib/libcarflow.so: $(ldd "$CHECK" | grep carflow)"
}

# A clean run prints one summary with 0 failures per process.
expect_clean() {
  local want="$1" log="$2" n
  n=$(grep -c "installed_plugin_check: node [0-9]*, [0-9]* checks, 0 failures, cf_finalize 0" "$log")
  [ "$n" -eq "$want" ] || fail "expected $want clean summaries, found $n"
}

threads_run() {
  (cd "$WORK" && CF_PLUGINS="$PLUGIN" timeout 300 "$CHECK" set 13) | tee "$WORK/threads.out" &&
    expect_clean 1 "$WORK/threads.out"
}

cfrun_run() {
  (cd "$WORK" && CF_PLUGINS="$PLUGIN" CF_ALGO_BROADCAST=example_binomial \
     CF_ALGO_ALLREDUCE=example_reduce_bcast CF_ALGO_GATHER_ALL=example_ring \
     timeout 300 "$PREFIX/bin/cfrun" --timeout 240 -n 3 --images 2 "$CHECK" env) | tee "$WORK/cfrun.out" &&
    expect_clean 3 "$WORK/cfrun.out"
}

# lists_example_algorithms LIB: carflow info --plugin LIB names each one.
lists_example_algorithms() {
  local info
  info=$(cd "$WORK" && timeout 60 "$PREFIX/bin/carflow" info --plugin "$1") || return 1
  local a kind name
  for a in "${EXAMPLE_ALGOS[@]}"; do
    read -r kind name <<<"$a"
    grep -Eq "^  $kind +$name " <<<"$info" || fail "carflow info does not list $kind $name" || return 1
  done
}

cli_plan() {
  (cd "$WORK" && timeout 60 "$PREFIX/bin/carflow" plan --plugin "$PLUGIN" --coll broadcast \
     --algo example_binomial --images 5 --bytes 64 --out F.json) || return 1
  grep -q '"algorithm": "example_binomial"' "$WORK/F.json" || fail "F.json does not name example_binomial"
}

# refused WHAT SAYS CMD...: CMD exits non-zero and its output names SAYS.
refused() {
  local what="$1" says="$2" out status
  shift 2
  out=$(cd "$WORK" && timeout 60 "$@" 2>&1)
  status=$?
  echo "$what: status $status: $out"
  [ $status -ne 0 ] || fail "$what: exited 0"
  grep -qF -- "$says" <<<"$out" || fail "$what: the message does not say '$says'"
}

bad_plugins() {
  local missing="$WORK/no_such_plugin.so" no_init="$WORK/libno_init.so" ok=0
  echo 'int not_a_plugin(void) { return 0; }' >"$WORK/no_init.c"
  cc -shared -fPIC "$WORK/no_init.c" -o "$no_init" || return 1
  refused "carflow info, missing library" "$missing" "$PREFIX/bin/carflow" info --plugin "$missing" || ok=1
  refused "carflow plan, no cf_plugin_init" "$no_init: exports no cf_plugin_init" \
    "$PREFIX/bin/carflow" plan --plugin "$no_init" --coll broadcast --images 2 --bytes 8 --out G.json || ok=1
  refused "program, missing library" "$missing" env CF_PLUGINS="$missing" "$CHECK" set 1 || ok=1
  refused "program, no cf_plugin_init" "$no_init: exports no cf_plugin_init" \
    env CF_PLUGINS="$no_init" "$CHECK" set 1 || ok=1
  return $ok
}

# The installed Makefile finds its own prefix: no PKG_CONFIG_PATH needed.
examples_makefile() {
  local dir="$PREFIX/share/carflow/examples"
  env -u PKG_CONFIG_PATH make -C "$dir" PREFIX="$PREFIX" || return 1
  lists_example_algorithms "$dir/libexample_plugin.so" || return 1
  env -u PKG_CONFIG_PATH make -B -C "$dir" || return 1
  lists_example_algorithms "$dir/libexample_plugin.so"
}

# carflow check on the installed copies of three built-ins: every P of a
# range passes on the sequential executor.
cli_check() {
  local dir="$PREFIX/share/carflow/examples" out a coll algo
  for a in "broadcast binomial_copy" "allreduce recursive_doubling_copy" "gather_all ring_copy"; do
    read -r coll algo <<<"$a"
    out=$(cd "$WORK" && timeout 120 "$PREFIX/bin/carflow" check --plugin "$dir/libbuiltin_copies.so" \
      --coll "$coll" --algo "$algo" --images 1:9) || { echo "$out"; fail "carflow check $algo failed"; return 1; }
    [ "$(grep -c '^P=.* PASS' <<<"$out")" -eq 9 ] || { echo "$out"; fail "carflow check $algo: not 9 PASS lines"; return 1; }
  done
}

step install install_prefix || finish
step build_plugin build_plugin || finish
step build_check build_check || finish
step threads_1_to_13 threads_run
step cfrun_3x2 cfrun_run
step cli_info lists_example_algorithms "$PLUGIN"
step cli_plan cli_plan
step bad_plugins bad_plugins
step examples_makefile examples_makefile
step cli_check cli_check
finish
