/* mpi_check.c — an MPI program that checks what it gets (issue #13): point-to-point at
 * eager and rendezvous sizes, every MPI-3 collective, and one-sided communication (the
 * window operations osc ucx maps onto UCX RMA and atomics), on any number of ranks.
 * Built twice by CMake, with mpicc.openmpi and mpicc.mpich.
 *
 * Every result is compared with the value it must have; a mismatch prints the check and
 * the rank and makes the exit status 1 (all ranks agree on it: MPI_Allreduce of the
 * failure counts).  Rank 0 ends with one line:
 *     mpi_check: N checks passed, 0 failed, B bytes sent by rank 0
 * B is a lower bound of the payload rank 0 sent to other ranks; the test compares it
 * with uroce's counters.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, fails, checks;
static long long sent;   /* payload bytes this rank sent to another rank (lower bound) */

#define CHECK(cond, ...)                                                        \
	do {                                                                    \
		checks++;                                                       \
		if (!(cond)) {                                                  \
			fails++;                                                \
			fprintf(stderr, "rank %d: %s:%d: CHECK(%s) failed: ", rank, \
				__FILE__, __LINE__, #cond);                     \
			fprintf(stderr, __VA_ARGS__);                           \
			fputc('\n', stderr);                                    \
		}                                                               \
	} while (0)

/* The byte at offset @i of a message from @src with @tag. */
static unsigned char pattern(int src, int tag, size_t i)
{
	return (unsigned char)(src * 131 + tag * 17 + i * 7 + (i >> 8));
}

static void fill(unsigned char *b, size_t n, int src, int tag)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pattern(src, tag, i);
}

static size_t first_bad(const unsigned char *b, size_t n, int src, int tag)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != pattern(src, tag, i))
			return i;
	return n;
}

/* ------------------------------------------------------------ point-to-point */

static void p2p(void)
{
	/* short, eager bcopy, eager zcopy, rendezvous (RDMA READ with UCX's defaults) */
	static const size_t sizes[] = { 0, 1, 64, 4096, 65536, 1 << 20, (4 << 20) + 3 };
	size_t max = (4 << 20) + 3;
	unsigned char *sbuf = malloc(max), *rbuf = malloc(max);
	int right = (rank + 1) % size, left = (rank + size - 1) % size;

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];
		int tag = (int)k + 1, count;
		MPI_Status st;
		MPI_Request rq[2];

		/* Blocking: even ranks send first, odd ranks receive first. */
		fill(sbuf, n, rank, tag);
		memset(rbuf, 0, n);
		if (rank % 2 == 0) {
			MPI_Send(sbuf, (int)n, MPI_BYTE, right, tag, MPI_COMM_WORLD);
			MPI_Recv(rbuf, (int)n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st);
		} else {
			MPI_Recv(rbuf, (int)n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st);
			MPI_Send(sbuf, (int)n, MPI_BYTE, right, tag, MPI_COMM_WORLD);
		}
		sent += (long long)n;
		MPI_Get_count(&st, MPI_BYTE, &count);
		CHECK(count == (int)n && st.MPI_SOURCE == left && st.MPI_TAG == tag,
		      "Send/Recv %zu: count %d source %d tag %d", n, count, st.MPI_SOURCE, st.MPI_TAG);
		CHECK(first_bad(rbuf, n, left, tag) == n, "Send/Recv %zu: byte %zu differs", n,
		      first_bad(rbuf, n, left, tag));

		/* Non-blocking, wildcard source and tag. */
		tag += 100;
		fill(sbuf, n, rank, tag);
		memset(rbuf, 0, n);
		MPI_Irecv(rbuf, (int)n, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rq[0]);
		MPI_Isend(sbuf, (int)n, MPI_BYTE, right, tag, MPI_COMM_WORLD, &rq[1]);
		MPI_Wait(&rq[0], &st);
		MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
		sent += (long long)n;
		CHECK(st.MPI_SOURCE == left && st.MPI_TAG == tag, "Irecv %zu: source %d tag %d", n,
		      st.MPI_SOURCE, st.MPI_TAG);
		CHECK(first_bad(rbuf, n, left, tag) == n, "Isend/Irecv %zu: byte %zu differs", n,
		      first_bad(rbuf, n, left, tag));

		/* Sendrecv, synchronous send. */
		tag += 100;
		fill(sbuf, n, rank, tag);
		memset(rbuf, 0, n);
		MPI_Sendrecv(sbuf, (int)n, MPI_BYTE, right, tag, rbuf, (int)n, MPI_BYTE, left, tag,
			     MPI_COMM_WORLD, &st);
		sent += (long long)n;
		CHECK(first_bad(rbuf, n, left, tag) == n, "Sendrecv %zu: byte %zu differs", n,
		      first_bad(rbuf, n, left, tag));
		tag += 100;
		fill(sbuf, n, rank, tag);
		if (rank % 2 == 0) {
			MPI_Ssend(sbuf, (int)n, MPI_BYTE, right, tag, MPI_COMM_WORLD);
			MPI_Recv(rbuf, (int)n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st);
		} else {
			MPI_Recv(rbuf, (int)n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st);
			MPI_Ssend(sbuf, (int)n, MPI_BYTE, right, tag, MPI_COMM_WORLD);
		}
		sent += (long long)n;
		CHECK(first_bad(rbuf, n, left, tag) == n, "Ssend %zu: byte %zu differs", n,
		      first_bad(rbuf, n, left, tag));
	}
	/* Probe, then a receive of the announced size. */
	{
		int n = 12345, count;
		MPI_Status st;

		fill(sbuf, (size_t)n, rank, 77);
		if (rank % 2 == 0) {
			MPI_Send(sbuf, n, MPI_BYTE, right, 77, MPI_COMM_WORLD);
			MPI_Probe(left, 77, MPI_COMM_WORLD, &st);
		} else {
			MPI_Probe(left, 77, MPI_COMM_WORLD, &st);
		}
		MPI_Get_count(&st, MPI_BYTE, &count);
		CHECK(count == n, "Probe: count %d", count);
		MPI_Recv(rbuf, count, MPI_BYTE, left, 77, MPI_COMM_WORLD, &st);
		if (rank % 2)
			MPI_Send(sbuf, n, MPI_BYTE, right, 77, MPI_COMM_WORLD);
		sent += n;
		CHECK(first_bad(rbuf, (size_t)n, left, 77) == (size_t)n, "Probe/Recv data");
	}
	free(sbuf);
	free(rbuf);
}

/* ---------------------------------------------------------------- collectives */

static void collectives(void)
{
	enum { N = 1000 };   /* elements per rank */
	int *a = malloc(sizeof(int) * N * size), *b = malloc(sizeof(int) * N * size);
	int *counts = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size);
	long long v, w;
	int ok;

	MPI_Barrier(MPI_COMM_WORLD);

	/* Bcast, from every root; 1 MiB so that it takes the rendezvous path too. */
	for (int root = 0; root < size; root++) {
		size_t n = 1 << 20;
		unsigned char *buf = malloc(n);

		if (rank == root)
			fill(buf, n, root, 5);
		else
			memset(buf, 0, n);
		MPI_Bcast(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
		if (rank == root)
			sent += (long long)n;
		CHECK(first_bad(buf, n, root, 5) == n, "Bcast root %d", root);
		free(buf);
	}
	/* Reduce, Allreduce (sum, max, min, product, bitwise and logical), on vectors. */
	for (int i = 0; i < N; i++)
		a[i] = rank * N + i;
	MPI_Reduce(a, b, N, MPI_INT, MPI_SUM, size - 1, MPI_COMM_WORLD);
	if (rank == size - 1) {
		ok = 1;
		for (int i = 0; i < N; i++)
			ok &= b[i] == N * size * (size - 1) / 2 + size * i;
		CHECK(ok, "Reduce SUM");
	}
	MPI_Allreduce(a, b, N, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	ok = 1;
	for (int i = 0; i < N; i++)
		ok &= b[i] == (size - 1) * N + i;
	CHECK(ok, "Allreduce MAX");
	MPI_Allreduce(a, b, N, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	ok = 1;
	for (int i = 0; i < N; i++)
		ok &= b[i] == i;
	CHECK(ok, "Allreduce MIN");
	v = rank + 2;
	MPI_Allreduce(&v, &w, 1, MPI_LONG_LONG, MPI_PROD, MPI_COMM_WORLD);
	{
		long long p = 1;

		for (int r = 0; r < size; r++)
			p *= r + 2;
		CHECK(w == p, "Allreduce PROD %lld want %lld", w, p);
	}
	v = 0xFF0 | (1ll << rank);
	MPI_Allreduce(&v, &w, 1, MPI_LONG_LONG, MPI_BAND, MPI_COMM_WORLD);
	CHECK(w == (size == 1 ? v : 0xFF0), "Allreduce BAND %llx", (unsigned long long)w);
	MPI_Allreduce(&v, &w, 1, MPI_LONG_LONG, MPI_BOR, MPI_COMM_WORLD);
	CHECK(w == (0xFF0 | ((1ll << size) - 1)), "Allreduce BOR %llx", (unsigned long long)w);
	ok = rank == 0;
	{
		int any;

		MPI_Allreduce(&ok, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
		CHECK(any == 1, "Allreduce LOR");
	}
	{
		struct { double v; int r; } in = { 1.5 * rank, rank }, out;

		MPI_Allreduce(&in, &out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
		CHECK(out.r == size - 1 && out.v == 1.5 * (size - 1), "Allreduce MAXLOC");
	}
	/* Gather, Gatherv, Scatter, Scatterv, Allgather, Allgatherv. */
	for (int i = 0; i < N; i++)
		a[i] = rank * 100000 + i;
	MPI_Gather(a, N, MPI_INT, b, N, MPI_INT, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		ok = 1;
		for (int r = 0; r < size; r++)
			for (int i = 0; i < N; i++)
				ok &= b[r * N + i] == r * 100000 + i;
		CHECK(ok, "Gather");
	} else {
		sent += N * (long long)sizeof(int);
	}
	for (int r = 0; r < size; r++) {
		counts[r] = N - r;
		displs[r] = r * N;
	}
	memset(b, 0xFF, sizeof(int) * N * size);
	MPI_Gatherv(a, N - rank, MPI_INT, b, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		ok = 1;
		for (int r = 0; r < size; r++)
			for (int i = 0; i < N; i++)
				ok &= b[r * N + i] == (i < N - r ? r * 100000 + i : -1);
		CHECK(ok, "Gatherv");
	}
	if (rank == 0)
		for (int r = 0; r < size; r++)
			for (int i = 0; i < N; i++)
				b[r * N + i] = r * 7 + i;
	MPI_Scatter(b, N, MPI_INT, a, N, MPI_INT, 0, MPI_COMM_WORLD);
	ok = 1;
	for (int i = 0; i < N; i++)
		ok &= a[i] == rank * 7 + i;
	CHECK(ok, "Scatter");
	if (rank == 0)
		sent += (size - 1) * (long long)N * (long long)sizeof(int);
	memset(a, 0, sizeof(int) * N);
	MPI_Scatterv(b, counts, displs, MPI_INT, a, N - rank, MPI_INT, 0, MPI_COMM_WORLD);
	ok = 1;
	for (int i = 0; i < N - rank; i++)
		ok &= a[i] == rank * 7 + i;
	CHECK(ok, "Scatterv");
	for (int i = 0; i < N; i++)
		a[i] = rank * 3 + i;
	MPI_Allgather(a, N, MPI_INT, b, N, MPI_INT, MPI_COMM_WORLD);
	ok = 1;
	for (int r = 0; r < size; r++)
		for (int i = 0; i < N; i++)
			ok &= b[r * N + i] == r * 3 + i;
	CHECK(ok, "Allgather");
	memset(b, 0xFF, sizeof(int) * N * size);
	MPI_Allgatherv(a, N - rank, MPI_INT, b, counts, displs, MPI_INT, MPI_COMM_WORLD);
	ok = 1;
	for (int r = 0; r < size; r++)
		for (int i = 0; i < N; i++)
			ok &= b[r * N + i] == (i < N - r ? r * 3 + i : -1);
	CHECK(ok, "Allgatherv");
	/* Alltoall, Alltoallv: block r of rank s holds s * 1000 + r * 10 + i. */
	for (int r = 0; r < size; r++)
		for (int i = 0; i < N; i++)
			a[r * N + i] = rank * 1000000 + r * 1000 + i;
	MPI_Alltoall(a, N, MPI_INT, b, N, MPI_INT, MPI_COMM_WORLD);
	ok = 1;
	for (int s = 0; s < size; s++)
		for (int i = 0; i < N; i++)
			ok &= b[s * N + i] == s * 1000000 + rank * 1000 + i;
	CHECK(ok, "Alltoall");
	sent += (size - 1) * (long long)N * (long long)sizeof(int);
	{
		int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size);
		int *rc = malloc(sizeof(int) * size), *rd = malloc(sizeof(int) * size);

		for (int r = 0; r < size; r++) {
			sc[r] = (rank + r) % N + 1;   /* what rank sends to r */
			sd[r] = r * N;
			rc[r] = (r + rank) % N + 1;   /* what r sends to rank */
			rd[r] = r * N;
		}
		memset(b, 0xFF, sizeof(int) * N * size);
		MPI_Alltoallv(a, sc, sd, MPI_INT, b, rc, rd, MPI_INT, MPI_COMM_WORLD);
		ok = 1;
		for (int s = 0; s < size; s++)
			for (int i = 0; i < N; i++)
				ok &= b[s * N + i] == (i < rc[s] ? s * 1000000 + rank * 1000 + i : -1);
		CHECK(ok, "Alltoallv");
		free(sc);
		free(sd);
		free(rc);
		free(rd);
	}
	/* Reduce_scatter_block, Reduce_scatter, Scan, Exscan. */
	for (int i = 0; i < N * size; i++)
		a[i] = rank + i;
	MPI_Reduce_scatter_block(a, b, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	ok = 1;
	for (int i = 0; i < N; i++)
		ok &= b[i] == size * (rank * N + i) + size * (size - 1) / 2;
	CHECK(ok, "Reduce_scatter_block");
	for (int r = 0; r < size; r++)
		counts[r] = N;
	MPI_Reduce_scatter(a, b, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	ok = 1;
	for (int i = 0; i < N; i++)
		ok &= b[i] == size * (rank * N + i) + size * (size - 1) / 2;
	CHECK(ok, "Reduce_scatter");
	v = rank + 1;
	MPI_Scan(&v, &w, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
	CHECK(w == (long long)(rank + 1) * (rank + 2) / 2, "Scan %lld", w);
	w = -1;
	MPI_Exscan(&v, &w, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (rank > 0)
		CHECK(w == (long long)rank * (rank + 1) / 2, "Exscan %lld", w);
	/* Non-blocking collectives. */
	{
		MPI_Request rq;
		int x = rank + 1, y = 0;

		MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
		CHECK(y == size * (size + 1) / 2, "Iallreduce %d", y);
		MPI_Ibarrier(MPI_COMM_WORLD, &rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
	}
	free(a);
	free(b);
	free(counts);
	free(displs);
}

/* ------------------------------------------------------------------ one-sided */

static void one_sided(void)
{
	enum { N = 4096 };                      /* longs per window */
	long *base, *buf = malloc(sizeof(long) * N);
	int right = (rank + 1) % size, left = (rank + size - 1) % size;
	MPI_Win win;
	int ok;

	MPI_Win_allocate(sizeof(long) * N, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
	for (int i = 0; i < N; i++)
		base[i] = -1;

	/* Active target (fence): Put into the right neighbour, Get from the left one. */
	MPI_Win_fence(0, win);
	for (int i = 0; i < N; i++)
		buf[i] = rank * 1000000L + i;
	MPI_Put(buf, N, MPI_LONG, right, 0, N, MPI_LONG, win);
	MPI_Win_fence(0, win);
	sent += N * (long long)sizeof(long);
	ok = 1;
	for (int i = 0; i < N; i++)
		ok &= base[i] == left * 1000000L + i;
	CHECK(ok, "Put (fence)");
	memset(buf, 0, sizeof(long) * N);
	MPI_Get(buf, N, MPI_LONG, left, 0, N, MPI_LONG, win);
	MPI_Win_fence(0, win);
	ok = 1;
	for (int i = 0; i < N; i++)
		ok &= buf[i] == (left + size - 1) % size * 1000000L + i;
	CHECK(ok, "Get (fence)");

	/* Accumulate from every rank into element 0..N-1 of rank 0, SUM. */
	for (int i = 0; i < N; i++)
		base[i] = 0;
	MPI_Win_fence(0, win);
	for (int i = 0; i < N; i++)
		buf[i] = rank + 1 + i;
	MPI_Accumulate(buf, N, MPI_LONG, 0, 0, N, MPI_LONG, MPI_SUM, win);
	MPI_Win_fence(0, win);
	if (rank == 0) {
		ok = 1;
		for (int i = 0; i < N; i++)
			ok &= base[i] == (long)size * (size + 1) / 2 + (long)size * i;
		CHECK(ok, "Accumulate SUM");
	}

	/* Passive target: lock, Put, Get, Fetch_and_op, Compare_and_swap, Get_accumulate. */
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
		base[0] = 0;
		MPI_Win_unlock(0, win);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	{
		long one = 1, old = -1, result = -1, cmp, val;

		/* Each rank adds 1 to rank 0's counter; fetched values are all distinct. */
		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
		MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, 0, MPI_SUM, win);
		MPI_Win_unlock(0, win);
		CHECK(old >= 0 && old < size, "Fetch_and_op old %ld", old);
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
		MPI_Get(&result, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win);
		MPI_Win_unlock(0, win);
		CHECK(result == size, "counter after Fetch_and_op: %ld want %d", result, size);
		MPI_Barrier(MPI_COMM_WORLD);
		/* Ranks in turn: compare with their rank, swap in rank + 1: ends at size. */
		if (rank == 0) {
			MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
			base[0] = 0;
			MPI_Win_unlock(0, win);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		for (int r = 0; r < size; r++) {
			if (r == rank) {
				cmp = rank;
				val = rank + 1;
				MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
				MPI_Compare_and_swap(&val, &cmp, &old, MPI_LONG, 0, 0, win);
				MPI_Win_unlock(0, win);
				CHECK(old == rank, "Compare_and_swap old %ld want %d", old, rank);
			}
			MPI_Barrier(MPI_COMM_WORLD);
		}
		if (rank == 0) {
			MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
			CHECK(base[0] == size, "after Compare_and_swap: %ld", base[0]);
			MPI_Win_unlock(0, win);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		/* A failing compare leaves the value. */
		cmp = -5;
		val = 99;
		MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
		MPI_Compare_and_swap(&val, &cmp, &old, MPI_LONG, 0, 0, win);
		MPI_Win_unlock(0, win);
		CHECK(old == size, "failing Compare_and_swap returned %ld", old);
		MPI_Barrier(MPI_COMM_WORLD);
		/* Get_accumulate (REPLACE) on the right neighbour: we see what was there. */
		MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
		for (int i = 0; i < 16; i++)
			base[100 + i] = rank * 10 + i;
		MPI_Win_unlock(rank, win);
		MPI_Barrier(MPI_COMM_WORLD);
		{
			long in[16], got[16];

			for (int i = 0; i < 16; i++)
				in[i] = -(rank * 10 + i);
			MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
			MPI_Get_accumulate(in, 16, MPI_LONG, got, 16, MPI_LONG, right, 100, 16, MPI_LONG,
					   MPI_REPLACE, win);
			MPI_Win_unlock(right, win);
			ok = 1;
			for (int i = 0; i < 16; i++)
				ok &= got[i] == right * 10 + i;
			CHECK(ok, "Get_accumulate fetched values");
		}
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
		ok = 1;
		for (int i = 0; i < 16; i++)
			ok &= base[100 + i] == -(left * 10 + i);
		MPI_Win_unlock(rank, win);
		CHECK(ok, "Get_accumulate REPLACE result");
		/* A large passive-target Put and Get (RDMA WRITE / READ sizes). */
		MPI_Barrier(MPI_COMM_WORLD);
		for (int i = 0; i < N; i++)
			buf[i] = rank * 7L + i * 3L;
		MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
		MPI_Put(buf, N, MPI_LONG, right, 0, N, MPI_LONG, win);
		MPI_Win_unlock(right, win);
		sent += N * (long long)sizeof(long);
		MPI_Barrier(MPI_COMM_WORLD);
		memset(buf, 0, sizeof(long) * N);
		MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win);
		MPI_Get(buf, N, MPI_LONG, right, 0, N, MPI_LONG, win);
		MPI_Win_unlock(right, win);
		ok = 1;
		for (int i = 0; i < N; i++)
			ok &= buf[i] == rank * 7L + i * 3L;
		CHECK(ok, "passive Put then Get back");
	}
	MPI_Win_free(&win);
	free(buf);
}

int main(int argc, char **argv)
{
	int provided, all_fails = 0, all_checks = 0;

	MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 2) {
		fprintf(stderr, "mpi_check: needs at least 2 ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	p2p();
	collectives();
	one_sided();
	MPI_Allreduce(&fails, &all_fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	MPI_Allreduce(&checks, &all_checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_check: %d checks passed, %d failed, %lld bytes sent by rank 0\n",
		       all_checks - all_fails, all_fails, sent);
	MPI_Finalize();
	return all_fails ? 1 : 0;
}
