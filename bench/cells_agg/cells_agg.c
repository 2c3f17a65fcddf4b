/*
 * A day's difference-digest cells summed by one aggregate, for bench/cell_cost.py only.
 *
 * The cells are those of stores/postgres/dialect.py day_cell_sql (encoding/iblt.py is
 * the contract): K = 3 disjoint sub-tables of `width` cells, a row's cell in sub-table j
 * from bits 21j .. 21j+20 of its row hash, each cell the row count and the sums mod 2^64
 * of row hashes, check hashes and event times. The bench checks that both give the same
 * cells before it times either. It measures what the cells cost when a row is one
 * transition into an array rather than K lookups of the executor's hash groups, each
 * with four aggregates: no check installs or calls it.
 */
#include "postgres.h"
#include "fmgr.h"
#include "utils/array.h"
#include "catalog/pg_type.h"
#include "datatype/timestamp.h"
#include "utils/timestamp.h"

PG_MODULE_MAGIC;

#define K 3
#define BITS 21
#define MASK21 ((UINT64CONST(1) << BITS) - 1)
#define M32 UINT64CONST(0xffffffff)

typedef struct
{
	int32		width;
	uint64		cells[FLEXIBLE_ARRAY_MEMBER];	/* K * width cells of (n, digest, checks, times);
												 * unsigned, so the sums wrap mod 2^64 */
} Cells;

/* Add one row (row hash, event time) to its K cells; NULL rows add nothing. */
PG_FUNCTION_INFO_V1(cells_add);
Datum
cells_add(PG_FUNCTION_ARGS)
{
	MemoryContext aggctx;
	Cells	   *s;
	uint64		h, us, p, q, check;
	TimestampTz t;
	int32		w;
	int			j;

	if (!AggCheckCallContext(fcinfo, &aggctx))
		elog(ERROR, "cells_add called outside an aggregate");
	s = PG_ARGISNULL(0) ? NULL : (Cells *) PG_GETARG_POINTER(0);
	if (PG_ARGISNULL(1))
	{
		if (s == NULL)
			PG_RETURN_NULL();
		PG_RETURN_POINTER(s);
	}
	if (s == NULL)
	{
		w = PG_GETARG_INT32(3);
		if (w < 1 || w > (1 << BITS))
			elog(ERROR, "width must be between 1 and %d, got %d", 1 << BITS, w);
		s = MemoryContextAllocZero(aggctx, offsetof(Cells, cells) + sizeof(uint64) * K * w * 4);
		s->width = w;
	}
	w = s->width;
	h = (uint64) PG_GETARG_INT64(1);
	t = PG_GETARG_TIMESTAMPTZ(2);
	if (TIMESTAMP_NOT_FINITE(t))
		elog(ERROR, "an event time must be finite");
	/* timestamptz counts microseconds from 2000-01-01: the epoch_micros of the cells is 1970's */
	us = (uint64) (t + (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY);
	/* encoding/iblt.py check_hash: each product of a 32-bit half fits in 63 bits */
	p = ((h & M32) * 1911520717) ^ ((h >> 32) * 1403217233);
	q = p ^ (p >> 29);
	check = ((q & M32) * 2028178513) ^ ((q >> 32) * 1500450271);
	for (j = 0; j < K; j++)
	{
		uint64	   *c = &s->cells[4 * (j * w + ((h >> (BITS * j)) & MASK21) % w)];

		c[0] += 1;
		c[1] += h;
		c[2] += check;
		c[3] += us;
	}
	PG_RETURN_POINTER(s);
}

/* Return the cells that are not zero as one bigint[] of (index, count, digest, checks, times). */
PG_FUNCTION_INFO_V1(cells_final);
Datum
cells_final(PG_FUNCTION_ARGS)
{
	Cells	   *s;
	Datum	   *out;
	int			n = 0, i, cells;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	s = (Cells *) PG_GETARG_POINTER(0);
	cells = K * s->width;
	out = palloc(sizeof(Datum) * cells * 5);
	for (i = 0; i < cells; i++)
	{
		uint64	   *c = &s->cells[4 * i];

		if (c[0] == 0 && c[1] == 0 && c[2] == 0 && c[3] == 0)
			continue;
		out[n++] = Int64GetDatum(i);
		out[n++] = Int64GetDatum((int64) c[0]);
		out[n++] = Int64GetDatum((int64) c[1]);
		out[n++] = Int64GetDatum((int64) c[2]);
		out[n++] = Int64GetDatum((int64) c[3]);
	}
	PG_RETURN_ARRAYTYPE_P(construct_array(out, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}
