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

/// A SHA-256 of a file computed by a second thread that reads the file itself (pread on a
/// descriptor of its own) behind a reader of the same file: the reader reports how far it has
/// read and hands over no bytes, so neither waits for the other until the digest is asked for.
/// The thread hashes exactly the bytes [0, total) the reader reported, so the digest and the
/// reader's byte count describe the same data; a file that shrinks meanwhile is an error. What
/// pread cannot read (a pipe, a terminal, a socket) is hashed from the reader's bytes instead, as
/// they are reported.
typedef struct TpDigestFollow TpDigestFollow;

/// Starts following the file open at `fd` (a regular file is read through a duplicate of `fd`,
/// from byte 0: the caller keeps and closes its own). `subject` names the file in error messages.
/// Without a thread (pthread_create failed) the bytes are hashed in tp_digest_follow_wait. Returns
/// NULL (err filled) when libcrypto, fstat or dup fails.
TpDigestFollow *tp_digest_follow_new(int fd, const char *subject, TpError *err);

/// Reports `len` more bytes read, at `data`: counted for a regular file (the thread reads them
/// itself), hashed now otherwise (they need to stay valid only during the call).
void tp_digest_follow_advance(TpDigestFollow *f, const void *data, size_t len);

/// Reports that the reader stopped: the digest covers the bytes reported.
void tp_digest_follow_end(TpDigestFollow *f);

/// Waits for the digest (reporting the end first if tp_digest_follow_end was not called) and
/// writes it to `hex`; may be called again (the same answer). @return 0, -errno when the thread
/// could not read the file, TP_EINVAL when the file ended before the bytes reported ("<subject>:
/// the file shrank while it was read (it ends at byte N, M bytes were read)", M all the bytes
/// reported) or libcrypto failed (err filled).
int tp_digest_follow_wait(TpDigestFollow *f, char hex[TP_DIGEST_SHA256_HEX + 1], TpError *err);

/// Stops the thread (at its next block, whether or not the digest is done) and frees the
/// follower. NULL is accepted.
void tp_digest_follow_free(TpDigestFollow *f);
