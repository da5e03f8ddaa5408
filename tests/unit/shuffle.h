/* SPDX-License-Identifier: MIT */
/*
 * shuffle.h - a seeded random permutation for the policy simulators
 * (test_policy.c, test_belady.c): an epoch's read order.
 */
#ifndef FUSEFS_TEST_SHUFFLE_H
#define FUSEFS_TEST_SHUFFLE_H

#include <stdlib.h>

/* shuffle() - @a becomes a permutation of 0..@n-1, the same for a @seed */
static inline void shuffle(unsigned *a, unsigned n, unsigned seed)
{
	unsigned i;

	srand(seed);
	for (i = 0; i < n; i++)
		a[i] = i;
	for (i = n - 1; i > 0; i--) {
		unsigned j = rand() % (i + 1), t = a[i];

		a[i] = a[j];
		a[j] = t;
	}
}

#endif
