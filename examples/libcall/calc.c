/*
 * calc.c - libcalc (see calc.h).  Kept trivially cheap, so that the
 * libcall servlet measures the cost of calling into a shared library
 * (through the PLT), not the work done there.
 */
#include "calc.h"

#define CALC_MOD 1000003u

uint32_t calc_step(uint32_t acc, uint32_t i)
{
    return (uint32_t)(((uint64_t)acc * 31u + i) % CALC_MOD);
}
