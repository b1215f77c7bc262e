! mpi_layer_f08: a program of the mpi_f08 module through libcarflow_mpi:
! blocking collectives (in place too), a nonblocking allreduce completed by
! a loop of MPI_Test (so the test must move carflow's pending call), a
! nonblocking barrier and broadcast completed by MPI_Wait and MPI_Waitall,
! on MPI_COMM_WORLD, a duplicate and a Cartesian communicator, each checked.
! Prints "mpi_layer_f08: rank R: N failures"; stops with 1 when one failed.
!   mpirun -np P [-x LD_PRELOAD=.../libcarflow_mpi.so] mpi_layer_f08
program mpi_layer_f08
  use mpi_f08
  implicit none
  integer :: rank, nproc, failures
  type(MPI_Comm) :: dup, cart
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nproc)
  failures = 0
  call check(MPI_COMM_WORLD)
  call MPI_Comm_dup(MPI_COMM_WORLD, dup)
  call check(dup)
  call MPI_Cart_create(MPI_COMM_WORLD, 1, [nproc], [.true.], .false., cart)
  call check(cart)
  call MPI_Comm_free(cart)
  call MPI_Comm_free(dup)
  print '(a,i0,a,i0,a)', 'mpi_layer_f08: rank ', rank, ': ', failures, ' failures'
  call MPI_Finalize()
  if (failures /= 0) stop 1

contains

  ! A failed check, counted and named.
  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    if (ok) return
    failures = failures + 1
    print '(a,i0,2a)', 'mpi_layer_f08: wrong on rank ', rank, ': ', what
  end subroutine

  subroutine check(comm)
    type(MPI_Comm), intent(in) :: comm
    integer :: me, n, x, y, ranks(64)
    double precision :: d(3)
    type(MPI_Request) :: requests(2)
    logical :: done
    call MPI_Comm_rank(comm, me)
    call MPI_Comm_size(comm, n)
    call MPI_Barrier(comm)
    y = -1
    if (me == 0) y = 42
    call MPI_Bcast(y, 1, MPI_INTEGER, 0, comm)
    call expect(y == 42, 'MPI_Bcast')
    d = [1d0, 2d0, 3d0] * (me + 1)
    call MPI_Allreduce(MPI_IN_PLACE, d, 3, MPI_DOUBLE_PRECISION, MPI_SUM, comm)
    call expect(all(abs(d - [1d0, 2d0, 3d0] * (n * (n + 1) / 2)) < 1d-9), 'MPI_Allreduce in place')
    call MPI_Allgather(me, 1, MPI_INTEGER, ranks, 1, MPI_INTEGER, comm)
    call expect(all(ranks(1:n) == [(x, x = 0, n - 1)]), 'MPI_Allgather')
    x = -1
    call MPI_Iallreduce(me + 1, x, 1, MPI_INTEGER, MPI_MAX, comm, requests(1))
    done = .false.
    do while (.not. done)
      call MPI_Test(requests(1), done, MPI_STATUS_IGNORE)
    end do
    call expect(x == n, 'MPI_Iallreduce with MPI_Test')
    y = -1
    if (me == n - 1) y = 7
    call MPI_Ibcast(y, 1, MPI_INTEGER, n - 1, comm, requests(1))
    call MPI_Ibarrier(comm, requests(2))
    call MPI_Waitall(2, requests, MPI_STATUSES_IGNORE)
    call expect(y == 7, 'MPI_Ibcast with MPI_Waitall')
    call MPI_Ibarrier(comm, requests(1))
    call MPI_Wait(requests(1), MPI_STATUS_IGNORE)
  end subroutine

end program
