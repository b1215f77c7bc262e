"""mpi4py through libcarflow_mpi: bcast (pickled objects), Allreduce,
Allgather and Bcast of buffers, the v forms, and every nonblocking
collective completed by Wait, Waitall, Waitany, Waitsome or a Test loop, on
COMM_WORLD and on a split. Each rank
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
    return out + v_forms(comm, name) + nonblocking(comm, name)


def v_forms(comm, name):
    """Rank i gives (i % 3) + 1 ints; displacements leave a gap of one."""
    r, p = comm.Get_rank(), comm.Get_size()
    counts = [i % 3 + 1 for i in range(p)]
    displs = [sum(counts[:i]) + i for i in range(p)]
    mine = array("i", [100 * r + k for k in range(counts[r])])
    out = []
    every = array("i", [-1] * (sum(counts) + p))
    comm.Allgatherv(mine, [every, counts, displs, MPI.INT])
    out.append(f"{name} Allgatherv {list(every)}")
    root = p - 1
    gathered = array("i", [-1] * (sum(counts) + p))
    comm.Gatherv(mine, [gathered, counts, displs, MPI.INT] if r == root else None, root=root)
    out.append(f"{name} Gatherv {list(gathered)}")
    back = array("i", [-1] * counts[r])
    comm.Scatterv([gathered, counts, displs, MPI.INT] if r == root else None, back, root=root)
    out.append(f"{name} Scatterv {list(back)}")
    send_counts = [(r + j) % 2 + 1 for j in range(p)]
    recv_counts = [(i + r) % 2 + 1 for i in range(p)]
    send = array("d", [float(10 * r + j) for j in range(p) for _ in range(send_counts[j])])
    recv = array("d", [0.0] * sum(recv_counts))
    comm.Alltoallv([send, send_counts], [recv, recv_counts])
    out.append(f"{name} Alltoallv {list(recv)}")
    return out


def finish(requests, how):
    if how == 0:
        MPI.Request.Waitall(requests)
    elif how == 1:
        for req in requests:
            req.Wait()
    elif how == 2:
        while not MPI.Request.Testall(requests):
            pass
    elif how == 3:
        while MPI.Request.Waitany(requests) != MPI.UNDEFINED:
            pass
    else:
        while MPI.Request.Waitsome(requests):
            pass


def nonblocking(comm, name):
    """Every nonblocking collective, started in groups and completed together."""
    r, p = comm.Get_rank(), comm.Get_size()
    src = array("d", [r + 1.0, 2.0 * r, 3.0] * p)
    bufs = {k: array("d", [0.0] * (3 if k in ("rsb", "rs") else 3 * p))
            for k in ("reduce", "allreduce", "scan", "exscan", "rsb", "rs")}
    ints = {k: array("i", [-1] * (2 * p)) for k in ("gather", "allgather", "alltoall")}
    bc = array("l", range(50)) if r == 0 else array("l", [0] * 50)
    piece = array("i", [-1, -1])
    counts = [i % 2 + 1 for i in range(p)]
    every = array("i", [-1] * sum(counts))
    gv = array("i", [-1] * sum(counts))
    sv = array("i", [-1] * counts[r])
    mine = array("i", [7 * r + k for k in range(counts[r])])
    a2av = array("i", [-1] * p)
    groups = [
        [comm.Ibarrier(), comm.Ibcast(bc, root=0), comm.Iallreduce(src, bufs["allreduce"], op=MPI.SUM),
         comm.Ireduce(src, bufs["reduce"], op=MPI.MAX, root=p - 1)],
        [comm.Iscan(src, bufs["scan"], op=MPI.SUM), comm.Iexscan(src, bufs["exscan"], op=MPI.SUM),
         comm.Ireduce_scatter_block(src, bufs["rsb"], op=MPI.SUM),
         comm.Ireduce_scatter(src, bufs["rs"], [3] * p, op=MPI.PROD)],
        [comm.Igather(array("i", [r, -r]), ints["gather"], root=0),
         comm.Iallgather(array("i", [r, r * r]), ints["allgather"]),
         comm.Ialltoall(array("i", [10 * r + j for j in range(2 * p)]), ints["alltoall"]),
         comm.Iscatter(array("i", list(range(2 * p))) if r == 0 else None, piece, root=0)],
        [comm.Iallgatherv(mine, [every, counts]),
         comm.Igatherv(mine, [gv, counts] if r == 0 else None, root=0),
         comm.Iscatterv([array("i", range(sum(counts))), counts] if r == 0 else None, sv, root=0),
         comm.Ialltoallv([array("i", [r] * p), [1] * p], [a2av, [1] * p])],
    ]
    for how, requests in enumerate(groups):
        finish(requests, (how + r) % 5)
    out = [f"{name} I{k} {list(v)}" for k, v in sorted(bufs.items())
           if k != "reduce" and not (k == "exscan" and r == 0)]
    out += [f"{name} I{k} {list(v)}" for k, v in sorted(ints.items()) if k != "gather" or r == 0]
    out += [f"{name} Ibcast {list(bc)}", f"{name} Iscatter {list(piece)}", f"{name} Iallgatherv {list(every)}",
            f"{name} Iscatterv {list(sv)}", f"{name} Ialltoallv {list(a2av)}"]
    if r == 0:
        out.append(f"{name} Igatherv {list(gv)}")
    if r == p - 1:
        out.append(f"{name} Ireduce {list(bufs['reduce'])}")
    return out


lines = results(world, "world")
half = world.Split(rank % 2, rank)
lines += results(half, f"half{rank % 2}")
half.Free()
with open(f"{sys.argv[1]}.{rank}", "w") as out:
    out.writelines(f"rank {rank}: {line}\n" for line in lines)
