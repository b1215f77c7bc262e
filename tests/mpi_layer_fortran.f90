! mpi_layer_fortran: Fortran's entry points (use mpi) through libcarflow_mpi:
! barrier, bcast, allreduce (and in place), reduce, scan, exscan,
! reduce_scatter_block, reduce_scatter, allgather, alltoall, gather,
! scatter, the v forms, every nonblocking form, each completed by another
! of wait, waitall, waitany, waitsome, test, testall, testany, testsome,
! request_get_status, on MPI_COMM_WORLD and on communicators made from
! Fortran (dup, split, split_type, create, cart_create, cart_sub), each
! checked against the sequential result. Prints "mpi_layer_fortran: rank
! R: N failures, checksum C" (C sums every result, to compare runs with
! and without the layer); stops with 1 when a check failed.
!   mpirun -np P [-x LD_PRELOAD=.../libcarflow_mpi.so] mpi_layer_fortran
program mpi_layer_fortran
  use mpi
  implicit none
  integer :: ierr, i, world_rank, world_size, dup, split, shared, created, cart, row, group, even, failures
  integer(8) :: checksum
  call mpi_init(ierr)
  call mpi_comm_rank(MPI_COMM_WORLD, world_rank, ierr)
  call mpi_comm_size(MPI_COMM_WORLD, world_size, ierr)
  failures = 0
  checksum = 0
  call check_all(MPI_COMM_WORLD)
  call mpi_comm_dup(MPI_COMM_WORLD, dup, ierr)
  call check_all(dup)
  call mpi_comm_split(MPI_COMM_WORLD, mod(world_rank, 2), -world_rank, split, ierr)
  call check_all(split)
  call mpi_comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, shared, ierr)
  call check_all(shared)
  call mpi_comm_group(MPI_COMM_WORLD, group, ierr)
  call mpi_group_incl(group, (world_size + 1) / 2, [(2 * i, i = 0, (world_size - 1) / 2)], even, ierr)
  call mpi_comm_create(MPI_COMM_WORLD, even, created, ierr)
  if (created /= MPI_COMM_NULL) call check_all(created)
  if (mod(world_size, 2) == 0) then
    call mpi_cart_create(MPI_COMM_WORLD, 2, [world_size / 2, 2], [.true., .false.], .false., cart, ierr)
  else
    call mpi_cart_create(MPI_COMM_WORLD, 2, [world_size, 1], [.true., .false.], .false., cart, ierr)
  end if
  call check_all(cart)
  call mpi_cart_sub(cart, [.true., .false.], row, ierr)
  call check_all(row)
  call mpi_comm_free(dup, ierr)
  call mpi_comm_free(split, ierr)
  call mpi_comm_free(shared, ierr)
  if (created /= MPI_COMM_NULL) call mpi_comm_free(created, ierr)
  call mpi_comm_free(row, ierr)
  call mpi_comm_free(cart, ierr)
  call mpi_group_free(even, ierr)
  call mpi_group_free(group, ierr)
  print '(a,i0,a,i0,a,i0)', 'mpi_layer_fortran: rank ', world_rank, ': ', failures, ' failures, checksum ', checksum
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

  ! got against want, and into the checksum.
  subroutine check(got, want, what)
    integer, intent(in) :: got(:), want(:)
    character(*), intent(in) :: what
    integer :: i
    call expect(all_int(got, want), what)
    checksum = checksum + sum([(int(got(i), 8) * i, i = 1, size(got))])
  end subroutine

  subroutine check_all(comm)
    integer, intent(in) :: comm
    call check_blocking(comm)
    call check_v(comm)
    call check_nonblocking(comm)
  end subroutine

  subroutine check_blocking(comm)
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
    checksum = checksum + nint(sum(y), 8)
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

  ! Rank r's block holds r + 1 integers 1000 r + i; in a v buffer, blocks
  ! are one element apart, so displacements are not packed.
  subroutine v_layout(size, counts, displs, whole)
    integer, intent(in) :: size
    integer, allocatable, intent(out) :: counts(:), displs(:), whole(:)
    integer :: r
    counts = [(r + 1, r = 0, size - 1)]
    displs = [(r * (r + 1) / 2 + r, r = 0, size - 1)]
    allocate(whole(displs(size) + counts(size)))
    whole = -1
    do r = 0, size - 1
      whole(displs(r + 1) + 1:displs(r + 1) + counts(r + 1)) = block_of(r)
    end do
  end subroutine

  function block_of(r)
    integer, intent(in) :: r
    integer :: block_of(r + 1), i
    block_of = [(1000 * r + i, i = 1, r + 1)]
  end function

  ! Alltoallv: rank s sends rank d s + d + 1 integers 10000 s + 100 d + i,
  ! received one element apart.
  subroutine a2a_layout(rank, size, scounts, sdispls, rcounts, rdispls, sendbuf, want)
    integer, intent(in) :: rank, size
    integer, allocatable, intent(out) :: scounts(:), sdispls(:), rcounts(:), rdispls(:), sendbuf(:), want(:)
    integer :: d, i
    scounts = [(rank + d + 1, d = 0, size - 1)]
    sdispls = [(sum(scounts(1:d)), d = 0, size - 1)]
    rcounts = scounts
    rdispls = [(sum(rcounts(1:d)) + d, d = 0, size - 1)]
    allocate(sendbuf(sum(scounts)), want(rdispls(size) + rcounts(size)))
    want = -1
    do d = 0, size - 1
      sendbuf(sdispls(d + 1) + 1:sdispls(d + 1) + scounts(d + 1)) = [(10000 * rank + 100 * d + i, i = 1, rank + d + 1)]
      want(rdispls(d + 1) + 1:rdispls(d + 1) + rcounts(d + 1)) = [(10000 * d + 100 * rank + i, i = 1, rank + d + 1)]
    end do
  end subroutine

  ! Reduce_scatter: rank r gets r + 1 integers; element j of every rank's
  ! input is rank + j, so the sum is size j + size (size - 1) / 2.
  subroutine rs_layout(rank, size, counts, input, want)
    integer, intent(in) :: rank, size
    integer, allocatable, intent(out) :: counts(:), input(:), want(:)
    integer :: r, j, first
    counts = [(r + 1, r = 0, size - 1)]
    input = [(rank + j, j = 1, sum(counts))]
    first = rank * (rank + 1) / 2
    want = [(size * j + size * (size - 1) / 2, j = first + 1, first + rank + 1)]
  end subroutine

  subroutine check_v(comm)
    integer, intent(in) :: comm
    integer :: rank, size, root, ierr
    integer, allocatable :: counts(:), displs(:), whole(:), got(:), back(:), mine(:)
    integer, allocatable :: scounts(:), sdispls(:), rcounts(:), rdispls(:), sendbuf(:), want(:)
    call mpi_comm_rank(comm, rank, ierr)
    call mpi_comm_size(comm, size, ierr)
    call v_layout(size, counts, displs, whole)
    mine = block_of(rank)
    allocate(got, mold=whole)
    allocate(back(rank + 1))
    got = -1
    call mpi_allgatherv(mine, rank + 1, MPI_INTEGER, got, counts, displs, MPI_INTEGER, comm, ierr)
    call check(got, whole, 'allgatherv')
    do root = 0, size - 1
      got = -1
      call mpi_gatherv(mine, rank + 1, MPI_INTEGER, got, counts, displs, MPI_INTEGER, root, comm, ierr)
      if (rank == root) call check(got, whole, 'gatherv')
      back = -1
      call mpi_scatterv(whole, counts, displs, MPI_INTEGER, back, rank + 1, MPI_INTEGER, root, comm, ierr)
      call check(back, mine, 'scatterv')
    end do
    call a2a_layout(rank, size, scounts, sdispls, rcounts, rdispls, sendbuf, want)
    deallocate(got)
    allocate(got, mold=want)
    got = -1
    call mpi_alltoallv(sendbuf, scounts, sdispls, MPI_INTEGER, got, rcounts, rdispls, MPI_INTEGER, comm, ierr)
    call check(got, want, 'alltoallv')
    call rs_layout(rank, size, counts, sendbuf, want)
    back = -1
    call mpi_reduce_scatter(sendbuf, back, counts, MPI_INTEGER, MPI_SUM, comm, ierr)
    call check(back, want, 'reduce_scatter')
  end subroutine

  ! Every nonblocking form, each completed by a different wait or test.
  subroutine check_nonblocking(comm)
    integer, intent(in) :: comm
    integer, parameter :: n = 4
    integer :: rank, size, i, r, ierr, req, reqs(4), idx, done, outcount, idxs(4), root
    integer :: status(MPI_STATUS_SIZE), statuses(MPI_STATUS_SIZE, 4)
    logical :: flag
    integer :: x(n), sum_all(n), scanned(n), exscanned(n), bc(n), pair(2), pair10(2)
    integer, allocatable :: counts(:), displs(:), whole(:), mine(:), rs_counts(:), rs_in(:), rs_want(:), rs_got(:)
    ! Nonblocking calls' buffers are variables: a temporary would be gone before the wait.
    integer, allocatable :: rsb_in(:), rsb_got(:), gat(:), sca(:), sca_in(:), agat(:), a2a_in(:), a2a_got(:)
    integer, allocatable :: vag(:), vg(:), vs(:), scounts(:), sdispls(:), rcounts(:), rdispls(:), a2av_in(:)
    integer, allocatable :: a2av_want(:), a2av_got(:)
    call mpi_comm_rank(comm, rank, ierr)
    call mpi_comm_size(comm, size, ierr)
    root = size - 1

    call mpi_ibarrier(comm, req, ierr)
    call mpi_wait(req, status, ierr)
    call expect(ierr == MPI_SUCCESS .and. req == MPI_REQUEST_NULL, 'ibarrier + wait')

    bc = merge([(7 * i, i = 1, n)], [(-1, i = 1, n)], rank == root)
    call mpi_ibcast(bc, n, MPI_INTEGER, root, comm, req, ierr)
    flag = .false.
    do while (.not. flag)
      call mpi_test(req, flag, status, ierr)
    end do
    call check(bc, [(7 * i, i = 1, n)], 'ibcast + test')

    x = [(rank + i, i = 1, n)]
    reqs = MPI_REQUEST_NULL
    call mpi_iallreduce(x, sum_all, n, MPI_INTEGER, MPI_SUM, comm, reqs(1), ierr)
    call mpi_ireduce(x, bc, n, MPI_INTEGER, MPI_MAX, root, comm, reqs(2), ierr)
    call mpi_waitall(2, reqs, statuses, ierr)
    call expect(all(reqs == MPI_REQUEST_NULL), 'waitall nulls requests')
    call check(sum_all, [(size * i + size * (size - 1) / 2, i = 1, n)], 'iallreduce + waitall')
    if (rank == root) call check(bc, [(size - 1 + i, i = 1, n)], 'ireduce + waitall')

    call mpi_iscan(x, scanned, n, MPI_INTEGER, MPI_SUM, comm, reqs(1), ierr)
    call mpi_iexscan(x, exscanned, n, MPI_INTEGER, MPI_SUM, comm, reqs(2), ierr)
    do i = 1, 2
      call mpi_waitany(2, reqs, idx, status, ierr)
      call expect(idx >= 1 .and. idx <= 2, 'waitany index')
    end do
    call mpi_waitany(2, reqs, idx, MPI_STATUS_IGNORE, ierr)
    call expect(idx == MPI_UNDEFINED, 'waitany with nothing active')
    call check(scanned, [((rank + 1) * i + rank * (rank + 1) / 2, i = 1, n)], 'iscan + waitany')
    if (rank > 0) call check(exscanned, [(rank * i + rank * (rank - 1) / 2, i = 1, n)], 'iexscan + waitany')

    rsb_in = [(100 * rank + i, i = 0, 2 * size - 1)]
    allocate(rsb_got(2))
    call rs_layout(rank, size, rs_counts, rs_in, rs_want)
    allocate(rs_got(rank + 1))
    call mpi_ireduce_scatter_block(rsb_in, rsb_got, 2, MPI_INTEGER, MPI_SUM, comm, reqs(1), ierr)
    call mpi_ireduce_scatter(rs_in, rs_got, rs_counts, MPI_INTEGER, MPI_SUM, comm, reqs(2), ierr)
    done = 0
    do while (done < 2)
      call mpi_waitsome(2, reqs, outcount, idxs, statuses, ierr)
      call expect(outcount >= 1 .and. all(reqs(idxs(1:outcount)) == MPI_REQUEST_NULL), 'waitsome indices')
      done = done + outcount
    end do
    call check(rsb_got, [100 * size * (size - 1) / 2 + 2 * rank * size, &
                         100 * size * (size - 1) / 2 + (2 * rank + 1) * size], 'ireduce_scatter_block + waitsome')
    call check(rs_got, rs_want, 'ireduce_scatter + waitsome')

    allocate(gat(2 * size), sca(2))
    gat = -1
    sca = -1
    pair = [rank, -rank]
    sca_in = [(r, r = 0, 2 * size - 1)]
    call mpi_igather(pair, 2, MPI_INTEGER, gat, 2, MPI_INTEGER, root, comm, reqs(1), ierr)
    call mpi_iscatter(sca_in, 2, MPI_INTEGER, sca, 2, MPI_INTEGER, 0, comm, reqs(2), ierr)
    flag = .false.
    do while (.not. flag)
      call mpi_testall(2, reqs, flag, MPI_STATUSES_IGNORE, ierr)
    end do
    if (rank == root) call check(gat, [([r, -r], r = 0, size - 1)], 'igather + testall')
    call check(sca, [2 * rank, 2 * rank + 1], 'iscatter + testall')

    allocate(agat(2 * size), a2a_got(2 * size))
    a2a_in = [(100 * rank + i, i = 0, 2 * size - 1)]
    pair10 = [rank, 10 * rank]
    call mpi_iallgather(pair10, 2, MPI_INTEGER, agat, 2, MPI_INTEGER, comm, reqs(1), ierr)
    call mpi_ialltoall(a2a_in, 2, MPI_INTEGER, a2a_got, 2, MPI_INTEGER, comm, reqs(2), ierr)
    done = 0
    do while (done < 2)
      call mpi_testany(2, reqs, idx, flag, status, ierr)
      if (flag .and. idx /= MPI_UNDEFINED) done = done + 1
    end do
    call check(agat, [([r, 10 * r], r = 0, size - 1)], 'iallgather + testany')
    call check(a2a_got, [([100 * r + 2 * rank, 100 * r + 2 * rank + 1], r = 0, size - 1)], 'ialltoall + testany')

    call v_layout(size, counts, displs, whole)
    mine = block_of(rank)
    allocate(vag, mold=whole)
    allocate(vg, mold=whole)
    allocate(vs(rank + 1))
    vag = -1
    vg = -1
    vs = -1
    call a2a_layout(rank, size, scounts, sdispls, rcounts, rdispls, a2av_in, a2av_want)
    allocate(a2av_got, mold=a2av_want)
    a2av_got = -1
    call mpi_iallgatherv(mine, rank + 1, MPI_INTEGER, vag, counts, displs, MPI_INTEGER, comm, reqs(1), ierr)
    call mpi_igatherv(mine, rank + 1, MPI_INTEGER, vg, counts, displs, MPI_INTEGER, root, comm, reqs(2), ierr)
    call mpi_iscatterv(whole, counts, displs, MPI_INTEGER, vs, rank + 1, MPI_INTEGER, 0, comm, reqs(3), ierr)
    call mpi_ialltoallv(a2av_in, scounts, sdispls, MPI_INTEGER, a2av_got, rcounts, rdispls, MPI_INTEGER, comm, &
                        reqs(4), ierr)
    flag = .false.
    do while (.not. flag)
      call mpi_request_get_status(reqs(4), flag, status, ierr)
    end do
    call expect(reqs(4) /= MPI_REQUEST_NULL, 'request_get_status leaves the request')
    done = 0
    do while (done < 4)
      call mpi_testsome(4, reqs, outcount, idxs, statuses, ierr)
      if (outcount /= MPI_UNDEFINED) done = done + outcount
    end do
    call check(vag, whole, 'iallgatherv + testsome')
    if (rank == root) call check(vg, whole, 'igatherv + testsome')
    call check(vs, mine, 'iscatterv + testsome')
    call check(a2av_got, a2av_want, 'ialltoallv + request_get_status + testsome')
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
