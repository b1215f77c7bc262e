"""Compiler options the runtime's libraries add to .bazelrc's."""

# Small fixed-size clears and copies (value-initialised structs on every
# call) as SSE loops, not `rep stos` / `rep movs`, whose start-up costs tens
# of cycles on cores without fast short string ops (AMD Zen 2). GCC only:
# clang has no such options (CC=clang bazel build //... builds without them).
CARFLOW_COPTS = select({
    "//tools:compiler_clang": [],
    "//conditions:default": [
        "-mmemset-strategy=vector_loop:256:noalign,libcall:-1:noalign",
        "-mmemcpy-strategy=vector_loop:256:noalign,libcall:-1:noalign",
    ],
})
