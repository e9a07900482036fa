// SHA-256 through OpenSSL EVP (openssl/openssl, include/openssl/evp.h: EVP_MD_CTX_new,
// EVP_DigestInit_ex, EVP_DigestUpdate, EVP_DigestFinal_ex; EVP_sha256).
#include "digest.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

static void to_hex(const unsigned char *md, unsigned int len, char *hex) {
  static const char digits[] = "0123456789abcdef";
  for (unsigned int i = 0; i < len; i++) {
    hex[2 * i] = digits[md[i] >> 4];
    hex[2 * i + 1] = digits[md[i] & 0x0f];
  }
  hex[2 * len] = '\0';
}

static int start(EVP_MD_CTX **out, const char *subject, TpError *err) {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  if (!ctx) {
    return tp_error_set(err, TP_ENOMEM, "%s: cannot allocate a digest context", subject);
  }
  if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
    EVP_MD_CTX_free(ctx);
    return tp_error_set(err, TP_EINVAL, "%s: SHA-256 is not available in libcrypto", subject);
  }
  *out = ctx;
  return 0;
}

static int finish(EVP_MD_CTX *ctx, const char *subject, char *hex, TpError *err) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  int ok = EVP_DigestFinal_ex(ctx, md, &len) == 1 && len * 2 == TP_DIGEST_SHA256_HEX;
  EVP_MD_CTX_free(ctx);
  if (!ok) {
    return tp_error_set(err, TP_EINVAL, "%s: SHA-256 finalisation failed", subject);
  }
  to_hex(md, len, hex);
  return 0;
}

int tp_digest_sha256(const void *data, size_t len, char hex[TP_DIGEST_SHA256_HEX + 1],
                     TpError *err) {
  EVP_MD_CTX *ctx = NULL;
  int rc = start(&ctx, "sha256", err);
  if (rc != 0) {
    return rc;
  }
  if (len > 0 && EVP_DigestUpdate(ctx, data, len) != 1) {
    EVP_MD_CTX_free(ctx);
    return tp_error_set(err, TP_EINVAL, "sha256: digest update failed");
  }
  return finish(ctx, "sha256", hex, err);
}

int tp_digest_sha256_file(const char *path, char hex[TP_DIGEST_SHA256_HEX + 1], uint64_t *size,
                          TpError *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return tp_error_errno(err, "%s", path);
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int rc = tp_error_errno(err, "%s", path);
    close(fd);
    return rc;
  }
  if (S_ISDIR(st.st_mode)) {
    close(fd);
    errno = EISDIR;
    return tp_error_errno(err, "%s", path);
  }
  EVP_MD_CTX *ctx = NULL;
  int rc = start(&ctx, path, err);
  if (rc != 0) {
    close(fd);
    return rc;
  }
  unsigned char buf[65536];
  uint64_t total = 0;
  for (;;) {
    ssize_t got = read(fd, buf, sizeof buf);
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      rc = tp_error_errno(err, "%s", path);
      EVP_MD_CTX_free(ctx);
      close(fd);
      return rc;
    }
    if (got == 0) {
      break;
    }
    if (EVP_DigestUpdate(ctx, buf, (size_t)got) != 1) {
      EVP_MD_CTX_free(ctx);
      close(fd);
      return tp_error_set(err, TP_EINVAL, "%s: digest update failed", path);
    }
    total += (uint64_t)got;
  }
  close(fd);
  if (size) {
    *size = total;
  }
  return finish(ctx, path, hex, err);
}
