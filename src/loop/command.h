/*
 * command.h - "sandletd -s COMMAND": tell the running daemon of a
 * configuration file to do something, and wait for its answer.
 */
#ifndef SANDLET_COMMAND_H
#define SANDLET_COMMAND_H

#include "common/conf.h"

/* Exit statuses, as LSB init scripts use them. */
#define SANDLET_COMMAND_OK          0
#define SANDLET_COMMAND_FAILED      1
#define SANDLET_COMMAND_USAGE       2
#define SANDLET_COMMAND_NOT_RUNNING 7

/* Runs command ("reload", "upgrade", "wait-ready" or "pid") against the daemon whose state
 * file conf names, waiting at most timeout_ms for its answer; prints the
 * answer (stdout) or why there is none (stderr).  Returns a
 * SANDLET_COMMAND_* status. */
int sandlet_command(const sandlet_conf *conf, const char *command, unsigned timeout_ms);

#endif /* SANDLET_COMMAND_H */
