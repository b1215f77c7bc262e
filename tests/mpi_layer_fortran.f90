! mpi_layer_fortran: Fortran's entry points (use mpi) through libcarflow_mpi:
! barrier, bcast, allreduce (and in place), reduce, scan, exscan,
! reduce_scatter_block, allgather, alltoall, gather, scatter, on
! MPI_COMM_WORLD and on a dup and a split made from Fortran, each checked
! against the sequential result. Prints "mpi_layer_fortran: rank R: N
! failures"; stops with 1 when a check failed.
!   mpirun -np P [-x LD_PRELOAD=.../libcarflow_mpi.so] mpi_layer_fortran
program mpi_layer_fortran
  use mpi
  implicit none
  integer :: ierr, world_rank, dup, split, failures
  call mpi_init(ierr)
  call mpi_comm_rank(MPI_COMM_WORLD, world_rank, ierr)
  failures = 0
  call check_all(MPI_COMM_WORLD)
  call mpi_comm_dup(MPI_COMM_WORLD, dup, ierr)
  call check_all(dup)
  call mpi_comm_split(MPI_COMM_WORLD, mod(world_rank, 2), -world_rank, split, ierr)
  call check_all(split)
  call mpi_comm_free(dup, ierr)
  call mpi_comm_free(split, ierr)
  print '(a,i0,a,i0,a)', 'mpi_layer_fortran: rank ', world_rank, ': ', failures, ' failures'
  call mpi_finalize(ierr)
  if (failures /= 0) stop 1

contains

  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    if (.not. ok) then
      failures = failures + 1
      print '(a,i0,2a)', 'rank ', world_rank, ': wrong: ', what
    end if
  end subroutine

  subroutine check_all(comm)
    integer, intent(in) :: comm
    integer, parameter :: n = 5
    integer :: rank, size, i, r, root, ierr
    double precision :: x(n), y(n), acc(n)
    integer, allocatable :: got(:), mine(:), back(:)
    call mpi_comm_rank(comm, rank, ierr)
    call mpi_comm_size(comm, size, ierr)
    call mpi_barrier(comm, ierr)
    call expect(ierr == MPI_SUCCESS, 'barrier')

    x = [(dble(rank + i), i = 1, n)]
    call mpi_allreduce(x, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, comm, ierr)
    acc = [(dble(size * i + size * (size - 1) / 2), i = 1, n)]
    call expect(all_equal(y, acc), 'allreduce')
    y = x
    call mpi_allreduce(MPI_IN_PLACE, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, comm, ierr)
    call expect(all_equal(y, acc), 'allreduce in place')
    y = 0
    call mpi_reduce(x, y, n, MPI_DOUBLE_PRECISION, MPI_MAX, size - 1, comm, ierr)
    if (rank == size - 1) call expect(all_equal(y, [(dble(size - 1 + i), i = 1, n)]), 'reduce')
    call mpi_scan(x, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, comm, ierr)
    call expect(all_equal(y, [(dble((rank + 1) * i + rank * (rank + 1) / 2), i = 1, n)]), 'scan')
    call mpi_exscan(x, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, comm, ierr)
    if (rank > 0) call expect(all_equal(y, [(dble(rank * i + rank * (rank - 1) / 2), i = 1, n)]), 'exscan')

    x = dble(rank)
    call mpi_bcast(x, n, MPI_DOUBLE_PRECISION, 0, comm, ierr)
    call expect(all(x == 0d0), 'bcast')

    allocate(got(2 * size), mine(2 * size), back(2))
    call mpi_allgather([rank, 10 * rank], 2, MPI_INTEGER, got, 2, MPI_INTEGER, comm, ierr)
    call expect(all_int(got, [([r, 10 * r], r = 0, size - 1)]), 'allgather')
    mine = [(100 * rank + i, i = 0, 2 * size - 1)]
    call mpi_alltoall(mine, 2, MPI_INTEGER, got, 2, MPI_INTEGER, comm, ierr)
    call expect(all_int(got, [([100 * r + 2 * rank, 100 * r + 2 * rank + 1], r = 0, size - 1)]), 'alltoall')
    call mpi_reduce_scatter_block(mine, back, 2, MPI_INTEGER, MPI_SUM, comm, ierr)
    call expect(all_int(back, [100 * size * (size - 1) / 2 + 2 * rank * size, &
                               100 * size * (size - 1) / 2 + (2 * rank + 1) * size]), 'reduce_scatter_block')
    do root = 0, size - 1
      got = -1
      call mpi_gather([rank, -rank], 2, MPI_INTEGER, got, 2, MPI_INTEGER, root, comm, ierr)
      if (rank == root) call expect(all_int(got, [([r, -r], r = 0, size - 1)]), 'gather')
      back = -1
      call mpi_scatter(got, 2, MPI_INTEGER, back, 2, MPI_INTEGER, root, comm, ierr)
      call expect(all_int(back, [rank, -rank]), 'scatter')
    end do
    deallocate(got, mine, back)
  end subroutine

  logical function all_equal(a, b)
    double precision, intent(in) :: a(:), b(:)
    all_equal = all(a == b)
  end function

  logical function all_int(a, b)
    integer, intent(in) :: a(:), b(:)
    all_int = size(a) == size(b) .and. all(a == b)
  end function
end program
