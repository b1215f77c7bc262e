"""mpi4py through libcarflow_mpi: bcast (pickled objects), Allreduce,
Allgather and Bcast of buffers, on COMM_WORLD and on a split. Each rank
writes one line per result to PREFIX.RANK (argv[1]; one file each, as
mpirun may merge the lines of processes that print together), the same with
and without the layer (tests/mpi_layer_test.sh compares them)."""
import sys
from array import array

from mpi4py import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()


def results(comm, name):
    r, p = comm.Get_rank(), comm.Get_size()
    out = [f"{name} bcast {comm.bcast({'from': 0, 'items': list(range(5))} if r == 0 else None, root=0)}"]
    mine = array("d", [r + 1.0, 2.0 * r, 3.0])
    total = array("d", [0.0] * 3)
    comm.Allreduce(mine, total, op=MPI.SUM)
    out.append(f"{name} Allreduce {list(total)}")
    gathered = array("i", [0] * (2 * p))
    comm.Allgather(array("i", [r, r * r]), gathered)
    out.append(f"{name} Allgather {list(gathered)}")
    buf = array("l", range(100)) if r == p - 1 else array("l", [0] * 100)
    comm.Bcast(buf, root=p - 1)
    out.append(f"{name} Bcast {sum(buf)}")
    out.append(f"{name} allreduce {comm.allreduce(r + 1)}")
    return out


lines = results(world, "world")
half = world.Split(rank % 2, rank)
lines += results(half, f"half{rank % 2}")
half.Free()
with open(f"{sys.argv[1]}.{rank}", "w") as out:
    out.writelines(f"rank {rank}: {line}\n" for line in lines)
