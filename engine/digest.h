// SHA-256 digests of byte strings and of files (streamed, bounded memory) through OpenSSL's EVP
// interface, as lowercase hexadecimal.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/// Length of a SHA-256 digest in hexadecimal, without the terminating NUL.
#define TP_DIGEST_SHA256_HEX 64

/// Computes the SHA-256 of `len` bytes at `data` and writes 64 lowercase hex digits and a NUL
/// to `hex`. @return 0, or TP_ENOMEM / TP_EINVAL when libcrypto fails (err filled).
int tp_digest_sha256(const void *data, size_t len, char hex[TP_DIGEST_SHA256_HEX + 1],
                     TpError *err);

/// Computes the SHA-256 of the file at `path`, reading it in 64 KiB blocks, and writes the hex
/// digest to `hex` and the number of bytes read to `*size` (when `size` is not NULL).
/// @return 0, -errno when the file cannot be opened or read (err names the path; a directory
/// gives -EISDIR), or TP_ENOMEM / TP_EINVAL when libcrypto fails.
int tp_digest_sha256_file(const char *path, char hex[TP_DIGEST_SHA256_HEX + 1], uint64_t *size,
                          TpError *err);

/// A SHA-256 computed by a second thread over blocks handed to it in order, so that a reader
/// can hash what it reads while it does something else with the same bytes.
typedef struct TpDigestPipe TpDigestPipe;

/// Starts a pipe (and its thread; without a thread the blocks are hashed as they are pushed).
/// `subject` names the data in error messages. Returns NULL (err filled) when libcrypto fails.
TpDigestPipe *tp_digest_pipe_new(const char *subject, TpError *err);

/// Hands `len` bytes at `data` to the pipe and returns the block's ticket (1, 2, ...). The bytes
/// must stay unchanged until tp_digest_pipe_wait for that ticket (or finish/free) returns.
uint64_t tp_digest_pipe_push(TpDigestPipe *p, const void *data, size_t len);

/// Waits until the blocks up to `ticket` are hashed (their buffers can be reused).
void tp_digest_pipe_wait(TpDigestPipe *p, uint64_t ticket);

/// Waits for every block, writes the hex digest and frees the pipe.
/// @return 0, or TP_EINVAL when libcrypto failed (err filled).
int tp_digest_pipe_finish(TpDigestPipe *p, char hex[TP_DIGEST_SHA256_HEX + 1], TpError *err);

/// Stops the thread (after the blocks already pushed) and frees the pipe. NULL is accepted.
void tp_digest_pipe_free(TpDigestPipe *p);
