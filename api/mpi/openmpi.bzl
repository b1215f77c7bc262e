"""Build options of everything that holds the layer's code: the preloaded
library and bench/mpi_layer_cost. Debian's libopenmpi-dev puts mpi.h and
libmpi here, and PMIx (which carflow joins through) beside them."""

OPENMPI_COPTS = ["-isystem", "/usr/include/x86_64-linux-gnu/mpi"]

# libmpi for PMPI_*; what carflow itself links (TBB, libfabric, PMIx).
LAYER_LINKOPTS = [
    "-L/usr/lib/x86_64-linux-gnu/openmpi/lib",
    "-lmpi",
    "-ltbb",
    "-ldl",
    "-lpthread",
    "-L/usr/lib/x86_64-linux-gnu/pmix2/lib",
    "-Wl,-rpath,/usr/lib/x86_64-linux-gnu/pmix2/lib",
    "-lpmix",
]
