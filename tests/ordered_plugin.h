/* An order-keeping scan and reduce_vec written as a plug-in would write
   them (tests/ordered_plugin.c, carflow/generator.h only), for
   tests/plugin_ordered_test.cc. */
#ifndef CARFLOW_TESTS_ORDERED_PLUGIN_H
#define CARFLOW_TESTS_ORDERED_PLUGIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a registered generator saw; written by its calls (any image thread). */
typedef struct {
  uint32_t radix_seen; /* spec->radix of the latest call */
  uint32_t calls;
} ordered_record_t;

/* Registers `<prefix>_scan` (CF_KIND_SCAN) and `<prefix>_reduce`
   (CF_KIND_REDUCE_VEC), both CF_GEN_PRESERVES_ORDER, recording into
   `scan` and `reduce`. reversed = 1 makes them wrong for a
   non-commutative operator while keeping every message: the reduce
   combines the lower groups' partial on the right, the scan lays a
   group's operands out in reverse rank order. CF_OK or the
   cf_generator_register error. */
int ordered_plugin_register(const char *prefix, int reversed, ordered_record_t *scan, ordered_record_t *reduce);

/* The group size the generators use for spec->radix (0: 4). */
uint32_t ordered_plugin_group(uint32_t radix);

#ifdef __cplusplus
}
#endif

#endif /* CARFLOW_TESTS_ORDERED_PLUGIN_H */
