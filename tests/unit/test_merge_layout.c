// SPDX-License-Identifier: GPL-2.0-only
/*
 * merge's layout and links on hand-built stores: ops nested around the
 * calls of a thread, an op that would partly overlap moved to an overflow
 * track (and one our call crosses giving way), each call linked to the
 * innermost op around it, a started process's first call linked to its
 * parent's op, imported flows bound to their slices and paired. Events are
 * added out of time order, as inputs give them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "offline/merger.h"

struct fixture {
	struct merger *m;
	uint32_t proc, thread, child_thread;
};

static uint32_t track(struct merger *m, enum model_track_kind kind, uint32_t parent, uint32_t pid, uint32_t tid,
		      const char *name)
{
	struct model_track t = { .kind = kind, .parent = parent, .pid = pid, .tid = tid, .name = name, .engine = -1 };

	return store_track(&m->st, &t);
}

/* A slice on a track: ours (a runtime call) or an op of the PyTorch trace
 * with its External id. The event's index. */
static uint32_t slice(struct merger *m, uint32_t on, uint64_t ts, uint64_t dur, const char *name, int64_t ext_id)
{
	struct model_event e = { .kind = EV_SLICE, .ts = ts, .dur = dur, .name = name };

	if (ext_id >= 0) {
		e.cat = "cpu_op";
		e.args[e.nargs++] = (struct model_arg){ .name = "External id", .type = ARG_INT, .i = ext_id };
	} else {
		e.cat = "runtime";
	}
	store_event(&m->st, on, &e, ext_id >= 0 ? FROM_TORCH : 0);
	return (uint32_t)m->st.nev - 1;
}

static bool linked(const struct merger *m, uint32_t from, uint32_t to, int kind)
{
	for (size_t i = 0; i < m->st.nlinks; i++)
		if (m->st.links[i].from == from && m->st.links[i].to == to &&
		    MODEL_FLOW_KIND(m->st.links[i].id) == kind)
			return true;
	return false;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	f->m = calloc(1, sizeof(*f->m));
	store_init(&f->m->st);
	f->m->nhosts = 1;
	f->proc = track(f->m, TRACK_PROCESS, 0, 100, 0, "python3");
	f->thread = track(f->m, TRACK_THREAD, f->m->st.tracks[f->proc].id, 100, 100, "python3");
	track(f->m, TRACK_PROCESS, 0, 200, 0, "spyre-sim-run");
	f->child_thread = track(f->m, TRACK_THREAD, f->m->st.tracks[f->proc + 2].id, 200, 200, "spyre-sim-run");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	hm_free(&f->m->track_of);
	hm_free(&f->m->thread_of);
	hm_free(&f->m->process_of);
	free(f->m->forks);
	store_free(&f->m->st);
	free(f->m);
	free(f);
	return 0;
}

static void nesting_and_calls(void **state)
{
	struct fixture *f = *state;
	struct merger *m = f->m;
	uint64_t next = 0;
	/* out of order on purpose */
	uint32_t call1 = slice(m, f->thread, 150, 50, "flex::RuntimeStream::launchH2D", -1);
	uint32_t outer = slice(m, f->thread, 100, 300, "aten::add", 7);
	uint32_t inner = slice(m, f->thread, 140, 100, "aten::copy_", 8);
	uint32_t crossing = slice(m, f->thread, 300, 300, "aten::mul", 9); /* crosses outer's end */
	uint32_t lonely = slice(m, f->thread, 700, 10, "flex::RuntimeStream::synchronize", -1);
	uint32_t gives_way = slice(m, f->thread, 1000, 100, "aten::sum", 10);
	uint32_t crossing_call = slice(m, f->thread, 1050, 100, "flex::RuntimeStream::launchD2H", -1);

	merge_lay_out(m, &next);
	assert_int_equal(m->st.error, 0);
	/* the innermost op around the call */
	assert_int_equal(m->st.ev[call1].ext_id, 8);
	assert_true(linked(m, inner, call1, FLOW_OP_CALL));
	assert_false(linked(m, outer, call1, FLOW_OP_CALL));
	/* no op around it: not linked; our call that crosses an op stays, the
	 * op moves off the thread */
	assert_int_equal(m->st.ev[lonely].ext_id, STORE_NO_EXT_ID);
	assert_int_equal(m->st.ev[crossing_call].ext_id, STORE_NO_EXT_ID);
	assert_int_equal(m->calls, 3);
	assert_int_equal(m->calls_linked, 1);
	/* ops that would partly overlap: on the thread's first overflow track */
	assert_int_equal(m->overflowed, 2);
	for (uint32_t e = 0; e < m->st.nev; e++) {
		const struct model_track *t = &m->st.tracks[m->st.ev[e].track];

		if (e == crossing || e == gives_way) {
			assert_int_equal(t->kind, TRACK_LANE);
			assert_int_equal(t->parent, m->st.tracks[f->thread].id);
			assert_string_equal(t->name, "python3: ops overlapping (1)");
		} else {
			assert_int_equal(m->st.ev[e].track, f->thread);
		}
	}
	/* depths: imported ops on their own sequences, nested */
	assert_int_equal(m->st.ev[outer].depth, OP_DEPTH);
	assert_int_equal(m->st.ev[inner].depth, OP_DEPTH + 1);
}

static void spawn_and_flows(void **state)
{
	struct fixture *f = *state;
	struct merger *m = f->m;
	struct flows fl = { 0 };
	uint64_t next = 0;
	uint32_t op = slice(m, f->thread, 100, 1000, "spyre workload", 3);
	uint32_t later = slice(m, f->child_thread, 5000, 10, "flex::RuntimeStream::synchronize", -1);
	uint32_t first = slice(m, f->child_thread, 2000, 10, "flex::FlexAllocator::allocate", -1);
	uint32_t next_op = slice(m, f->thread, 1500, 100, "aten::backward", 4);
	struct flow_end ends[] = {
		/* kineto's fwdbwd arrow: from the op holding 120, to the first op at or after 1200 */
		{ MODEL_FLOW_ID(FLOW_FWDBWD, 5), f->thread, 120, true, true, FROM_TORCH, UINT32_MAX },
		{ MODEL_FLOW_ID(FLOW_FWDBWD, 5), f->thread, 1200, false, false, FROM_TORCH, UINT32_MAX },
		/* an end with no start: no arrow */
		{ MODEL_FLOW_ID(FLOW_FWDBWD, 6), f->thread, 1500, false, true, FROM_TORCH, UINT32_MAX },
	};

	m->forks = calloc(1, sizeof(*m->forks));
	m->forks[m->nforks++] = (struct fork_rec){ 200, 100, 500 }; /* forked inside the op */
	merge_lay_out(m, &next);
	merge_link_spawns(m, &next);
	assert_int_equal(m->spawns_linked, 1);
	assert_true(linked(m, op, first, FLOW_SPAWN));
	assert_false(linked(m, op, later, FLOW_SPAWN));
	assert_int_equal(m->st.ev[first].ext_id, 3);
	fl.v = ends;
	fl.n = fl.cap = 3;
	merge_bind_flows(m, &fl);
	merge_pair_flows(m, &fl);
	assert_int_equal(m->flows_paired, 1);
	assert_true(linked(m, op, next_op, FLOW_FWDBWD));
	assert_int_equal(m->st.error, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(nesting_and_calls, setup, teardown),
		cmocka_unit_test_setup_teardown(spawn_and_flows, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
