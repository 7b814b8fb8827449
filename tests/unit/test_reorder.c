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
	struct sbt_call_exit wait = { .h = { .type = SBT_CALL_EXIT, .size = sizeof(wait) - sizeof(wait.h),
					     .tid = 7, .ts = 1000 } };
	struct sbt_irq irq = { .h = { .type = SBT_IRQ, .size = sizeof(irq) - sizeof(irq.h), .ts = 1200 },
			       .start_ts = 900 };
	struct sbt_call_enter next = { .h = { .type = SBT_CALL_ENTER, .size = sizeof(next) - sizeof(next.h),
					      .tid = 7, .ts = 1000 } };

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(interrupt_before_the_wait_it_ended),
	};

	return cmocka_run_group_tests_name("reorder", tests, NULL, NULL);
}
