// SPDX-License-Identifier: GPL-2.0-only
/* The loader's reorder window: an interrupt recorded after the wait it
 * ended comes out before it; one thread's records keep their order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "capture/reorder.h"

static uint64_t out_ts[16];
static uint16_t out_type[16];
static int nout;

static void emit(void *ctx, const struct sbt_hdr *h)
{
	(void)ctx;
	out_ts[nout] = h->ts;
	out_type[nout++] = h->type;
}

static void interrupt_before_the_wait_it_ended(void **state)
{
	struct reorder q = { 0 };
	struct sbt_call_exit wait = {
		.h = { .type = SBT_CALL_EXIT, .size = sizeof(wait) - sizeof(wait.h), .tid = 7, .ts = 1000 }
	};
	struct sbt_irq irq = { .h = { .type = SBT_IRQ, .size = sizeof(irq) - sizeof(irq.h), .ts = 1200 },
			       .start_ts = 900 };
	struct sbt_call_enter next = {
		.h = { .type = SBT_CALL_ENTER, .size = sizeof(next) - sizeof(next.h), .tid = 7, .ts = 1000 }
	};

	(void)state;
	nout = 0;
	/* as the ring buffer gave them: the woken thread's return first */
	assert_int_equal(reorder_add(&q, &wait.h), 0);
	assert_int_equal(reorder_add(&q, &next.h), 0);
	assert_int_equal(reorder_add(&q, &irq.h), 0);
	reorder_release(&q, 950, emit, NULL);
	assert_int_equal(nout, 1); /* only what began before 950 */
	assert_int_equal(out_type[0], SBT_IRQ);
	reorder_release(&q, UINT64_MAX, emit, NULL);
	assert_int_equal(nout, 3);
	/* equal times keep their order: the thread's exit, then its entry */
	assert_int_equal(out_type[1], SBT_CALL_EXIT);
	assert_int_equal(out_type[2], SBT_CALL_ENTER);
	reorder_free(&q);
}

static uint64_t sum_ts, nseen;

static void check_and_sum(void *ctx, const struct sbt_hdr *h)
{
	const uint8_t *body = (const uint8_t *)(h + 1);

	(void)ctx;
	/* each record's bytes as they were added: none overwritten by a later one */
	for (uint16_t i = 0; i < h->size; i++)
		assert_int_equal(body[i], (uint8_t)(h->ts + i));
	sum_ts += h->ts;
	nseen++;
}

/* Records go through chunks that are used again: a million records of
 * every size, a few dozen held at a time, with now and then one too large
 * for a chunk: each comes out as it went in, the same few chunks are
 * filled again (not a new one each time: a new chunk would have a new
 * address, under the sanitizers' quarantine at least), and records still
 * held at the end are freed (the valgrind tier checks nothing leaks). */
static void chunks_used_again(void **state)
{
	static uint8_t buf[sizeof(struct sbt_hdr) + UINT16_MAX];
	struct sbt_hdr *h = (struct sbt_hdr *)buf;
	struct reorder q = { 0 };
	struct reorder_chunk *seen[64];
	size_t nseen_chunks = 0;

	(void)state;
	sum_ts = nseen = 0;
	for (uint64_t ts = 1; ts <= 1000000; ts++) {
		h->type = SBT_CALL_ENTER;
		h->size = ts % 100000 == 0 ? UINT16_MAX : (uint16_t)(ts * 7 % 251);
		h->ts = ts;
		for (uint32_t i = 0; i < h->size; i++)
			buf[sizeof(*h) + i] = (uint8_t)(ts + i);
		assert_int_equal(reorder_add(&q, h), 0);
		if (ts % 64 == 0) /* the window */
			reorder_release(&q, ts - 40, check_and_sum, NULL);
		for (size_t i = 0; i <= nseen_chunks && q.cur; i++) {
			if (i == nseen_chunks) {
				assert_true(nseen_chunks < 64);
				seen[nseen_chunks++] = q.cur;
				break;
			}
			if (seen[i] == q.cur)
				break;
		}
	}
	reorder_release(&q, 999990, check_and_sum, NULL);
	assert_int_equal(nseen, 999989);
	assert_true(q.n > 0);
	reorder_free(&q); /* with records still held */
	/* the one being filled, the spares, those whose last record is held */
	assert_true(nseen_chunks <= 8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(interrupt_before_the_wait_it_ended),
		cmocka_unit_test(chunks_used_again),
	};

	return cmocka_run_group_tests_name("reorder", tests, NULL, NULL);
}
