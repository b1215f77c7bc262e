#!/usr/bin/env bash
# tools/install.sh PREFIX: installs include/carflow/{carflow,generator}.h,
# lib/libcarflow.so, lib/libcarflow.a, lib/pkgconfig/carflow.pc,
# lib/libcarflow_mpi.so (MPI collectives through carflow, by LD_PRELOAD),
# bin/carflow (the CLI), bin/cfrun (the launcher) and the example plug-ins with a
# Makefile under share/carflow/examples, so that a C program builds with
#   cc prog.c $(pkg-config --cflags --libs carflow)
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: tools/install.sh PREFIX" >&2; exit 2; }
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="$(mkdir -p "$1" && cd "$1" && pwd)"
cd "$ROOT"
bazel build //api:libcarflow_shared.so //api:libcarflow_static //api/mpi:libcarflow_mpi.so \
  //tools:carflow_cli //tools:cfrun_bin >&2
mkdir -p "$PREFIX/include/carflow" "$PREFIX/lib/pkgconfig" "$PREFIX/bin" "$PREFIX/share/carflow/examples"
install -m 644 api/include/carflow/carflow.h api/include/carflow/generator.h "$PREFIX/include/carflow/"
install -m 755 bazel-bin/tools/carflow_cli "$PREFIX/bin/carflow"
install -m 755 bazel-bin/tools/cfrun_bin "$PREFIX/bin/cfrun"
install -m 644 api/examples/example_plugin.c api/examples/builtin_copies.c "$PREFIX/share/carflow/examples/"
cat > "$PREFIX/share/carflow/examples/Makefile" <<MK
# The example generator plug-ins, built against the installed carflow:
#   make && CF_PLUGINS=./libexample_plugin.so CF_ALGO_BROADCAST=example_binomial ./your_program
# (libbuiltin_copies.so: three of carflow's built-ins written as a plug-in).
# PREFIX is the install this file came from (make PREFIX=DIR for another);
# pkg-config looks there first, so carflow.pc need not be on PKG_CONFIG_PATH.
PREFIX = $PREFIX
export PKG_CONFIG_PATH := \$(PREFIX)/lib/pkgconfig\$(if \$(PKG_CONFIG_PATH),:\$(PKG_CONFIG_PATH))
all: libexample_plugin.so libbuiltin_copies.so
lib%.so: %.c
	\$(CC) -shared -fPIC -O2 \$< \$\$(pkg-config --cflags carflow) -o \$@
MK
install -m 755 bazel-bin/api/libcarflow_shared.so "$PREFIX/lib/libcarflow.so"
install -m 644 bazel-bin/api/libcarflow_all.a "$PREFIX/lib/libcarflow.a"
install -m 755 bazel-bin/api/mpi/libcarflow_mpi.so "$PREFIX/lib/libcarflow_mpi.so"
cat > "$PREFIX/lib/pkgconfig/carflow.pc" <<PC
prefix=$PREFIX
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: carflow
Description: nonblocking collectives as CAR dataflow graphs
Version: 0.1.0
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lcarflow
Libs.private: -ltbb -ldl -L/usr/lib/x86_64-linux-gnu/pmix2/lib -lpmix -lrt -lpthread -lstdc++
PC
echo "installed carflow into $PREFIX"
