// Exclusive advisory locks on a file (flock), released by the kernel when the holder dies, so
// that two supervisors never work on the same results directory at the same time.
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common.h"

/// Takes an exclusive flock(2) on `path` (created with mode 0644 when missing). The descriptor
/// is opened O_CLOEXEC, so programs started afterwards never inherit the lock; processes forked
/// without exec do share it until they exit. While another open file description holds the lock,
/// the attempt is repeated every 10 ms until `wait_ms` has passed (0: a single attempt). Once
/// held, the file is rewritten to contain "<pid of this process>\n" (read by tp_lock_holder).
/// @param fd_out receives the descriptor holding the lock; release it with tp_lock_release.
/// @return 0, -EBUSY when still held by someone else after `wait_ms` (err: "<path>: locked by
///   process <pid>" when the holder wrote its pid), or -errno (err filled).
int tp_lock_acquire(const char *path, int64_t wait_ms, int *fd_out, TpError *err);

/// Releases a lock taken by tp_lock_acquire (closes its descriptor). Negative fds are ignored.
/// The file itself is left in place: removing it would let two processes lock two different
/// files of the same name.
void tp_lock_release(int fd);

/// Reads the pid the current or last holder wrote into `path`.
/// @param pid receives it, or 0 when the file holds none (empty, or not a number).
/// @return 0 or -errno (err filled; -ENOENT when the file does not exist).
int tp_lock_holder(const char *path, pid_t *pid, TpError *err);

/// Whether a process with this pid exists (kill(pid, 0) succeeds or fails with EPERM).
bool tp_lock_pid_alive(pid_t pid);
