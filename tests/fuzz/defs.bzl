"""fuzz_target: one libFuzzer target and the test that replays its corpus.

Under --config=fuzz (clang: tools/carflow fuzz) NAME links libFuzzer's
driver; otherwise NAME links replay_main.cc and runs the inputs it is
given once each, so any compiler builds it. NAME is tagged manual: only
the fuzz runner builds it. NAME_corpus_test replays corpus/NAME/ in the
normal build, so every committed input, crashes found before among them,
stays a regression test.
"""

def fuzz_target(name, deps, linkopts = []):
    srcs = [name + "_fuzz.cc", "fuzz_check.h"]
    replay = ["replay_main.cc"]
    corpus = native.glob(["corpus/" + name + "/*"])
    native.cc_binary(
        name = name,
        srcs = srcs + select({
            ":libfuzzer": [],
            "//conditions:default": replay,
        }),
        linkopts = linkopts + select({
            ":libfuzzer": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        tags = ["manual"],
        deps = deps,
    )
    native.cc_test(
        name = name + "_corpus_test",
        size = "small",
        srcs = srcs + replay,
        args = ["tests/fuzz/corpus/" + name],
        data = corpus,
        linkopts = linkopts,
        deps = deps,
    )
