"""Macros for tests/BUILD: the shapes its tests come in.

Each macro writes the cc_test(s) of one shape of suite (tests/README.md
lists the suites). Lists keep a fixed order, as the hand-written rules
had it: the order of srcs and deps is the link order.
"""

# The sanitizer suppressions (.bazelrc's asan and tsan configs name them),
# in every test's runfiles: a sanitizer that cannot read its file dies.
SUPPRESSIONS = ["lsan.supp", "tsan.supp", "ubsan.supp"]

PTHREAD = ["-lpthread"]

# The API suites' usual deps; with //graph for those that build specs
# (and for every variant).
API_DEPS = [":test_util", "//api:carflow"]
API_GRAPH_DEPS = API_DEPS + ["//graph"]

# Variants of an API suite (name suffix -> env): the same tests must pass
# whoever moves the data (CF_PROGRESS, api/README.md "Environment"), and
# with rings between image threads even where they outnumber the cores
# (CF_INPROC_RINGS=1; oneTBB workers and other images' threads then push
# and drain too: on a 2-core machine rings are off for more than two
# images).
PROGRESS_VARIANTS = {
    "thread": {"CF_PROGRESS": "thread"},
    "block": {"CF_PROGRESS": "block"},
    "rings": {"CF_INPROC_RINGS": "1"},
}

# ... and under CF_CHECK=1 (api/README.md "Argument checking"): every call
# gets the entry barrier and its digests, and data, aggregates and the
# representative-thread mode must be unchanged. Not for suites that count
# messages (api_handles_test), which the entry barrier changes.
ALL_VARIANTS = dict(PROGRESS_VARIANTS, check = {"CF_CHECK": "1"})

def _doctest(name, srcs, deps, size, linkopts = None, data = []):
    native.cc_test(
        name = name,
        size = size,
        srcs = srcs,
        data = data + SUPPRESSIONS,
        linkopts = linkopts,
        deps = deps,
    )

def unit_test(name, deps, size, linkopts = None, data = []):
    """A doctest suite of one file, NAME.cc, on doctest_main.cc."""
    _doctest(name, ["doctest_main.cc", name + ".cc"], deps, size, linkopts, data)

def graph_test(name):
    """A graph test: hand-built DAGs (graph_test_dags.h), no generator needed."""
    _doctest(
        name,
        sorted(["doctest_main.cc", "graph_test_dags.h", name + ".cc"]),
        deps = ["//graph:generators", "//graph:graph"],
        size = "small",
        linkopts = PTHREAD,
    )

def generator_test(name):
    """A generator suite: DAGs checked against the reference (gen_check.h)."""
    _doctest(
        name,
        ["doctest_main.cc", name + ".cc", "coll_reference.h", "gen_check.h"],
        deps = ["//graph", "//graph:generators"],
        size = "medium",
    )

def api_test(name, size, deps = API_DEPS, env = None, variants = {}):
    """An API suite on api_main.cc (cf_init once), and its variants.

    Args:
      name: the suite; its tests are in NAME.cc.
      size: the suite's size (variants are all "large").
      deps: the suite's deps (variants take API_GRAPH_DEPS).
      env: the suite's environment, if any.
      variants: name suffix -> env: one more test NAME_SUFFIX per entry,
        the same sources run with that environment.
    """
    native.cc_test(
        name = name,
        size = size,
        srcs = sorted(["api_main.cc", name + ".cc"]),
        data = SUPPRESSIONS,
        env = env,
        linkopts = PTHREAD,
        deps = deps,
    )
    for suffix, variant_env in variants.items():
        native.cc_test(
            name = name + "_" + suffix,
            size = "large",
            srcs = ["api_main.cc", name + ".cc"],
            data = SUPPRESSIONS,
            env = variant_env,
            linkopts = PTHREAD,
            deps = API_GRAPH_DEPS,
        )

def launched_test(name, programs, data = [], timeout = None):
    """A test that starts PROGRAMS in processes under tools/cfrun.

    NAME.cc gets the launcher's path, then each program's, as arguments.
    Tagged exclusive: the multi-process suites run alone (tests/README.md).
    """
    native.cc_test(
        name = name,
        size = "large",
        timeout = timeout,
        srcs = [name + ".cc", "shell_run.h"],
        args = ["$(rootpath //tools:cfrun_bin)"] + ["$(rootpath %s)" % p for p in programs],
        data = sorted(programs) + data + SUPPRESSIONS + ["//tools:cfrun_bin"],
        tags = ["exclusive"],
    )
