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
