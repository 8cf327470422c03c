/*
 * check.h - "sandletd -t" beyond the syntax (check.c), and the bound
 * socket of a listen line that the start and the check share (listen.c).
 */
#ifndef SANDLET_LOOP_CHECK_H
#define SANDLET_LOOP_CHECK_H

#include "common/conf.h"

/* Everything a start would refuse that the parse cannot see: users and
 * groups, the docroot, the log folders, each servlet library (opened as
 * its sandbox's user).  Each problem is a line on standard error; returns
 * 0 when there is none, -1 otherwise. */
int sandlet_check_deep(const sandlet_conf *conf);

#endif
