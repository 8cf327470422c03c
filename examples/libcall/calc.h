/*
 * calc.h - libcalc, the separate shared library the libcall servlet
 * calls: a stand-in for any system or vendor library a servlet links.
 * Pure functions only: no I/O, no global state.
 */
#ifndef SANDLET_EXAMPLE_CALC_H
#define SANDLET_EXAMPLE_CALC_H

#include <stdint.h>

/* One step of a checksum-like recurrence: (acc * 31 + i) mod 1000003. */
uint32_t calc_step(uint32_t acc, uint32_t i);

#endif
