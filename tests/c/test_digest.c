// Unit tests of engine/digest: SHA-256 of strings and of files against the FIPS 180-2 test
// vectors (NIST, "Secure Hash Standard", appendix B: "abc", the 448-bit message, one million 'a').
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "digest.h"

static const char *const ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
static const char *const TWO_BLOCKS =
    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
static const char *const MILLION_A =
    "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
// SHA-256 of the empty string (the well-known e3b0c442... digest).
static const char *const EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

static void test_strings(void) {
  char hex[TP_DIGEST_SHA256_HEX + 1];
  TpError err = {0};
  CHECK_INT(tp_digest_sha256("abc", 3, hex, &err), 0);
  CHECK_STR(hex, ABC);
  const char *msg = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  CHECK_INT(tp_digest_sha256(msg, strlen(msg), hex, &err), 0);
  CHECK_STR(hex, TWO_BLOCKS);
  CHECK_INT(tp_digest_sha256("", 0, hex, &err), 0);
  CHECK_STR(hex, EMPTY);
  // Embedded NUL bytes count: "a\0b" differs from "a".
  char other[TP_DIGEST_SHA256_HEX + 1];
  CHECK_INT(tp_digest_sha256("a\0b", 3, hex, &err), 0);
  CHECK_INT(tp_digest_sha256("a", 1, other, &err), 0);
  CHECK(strcmp(hex, other) != 0);
}

static void test_files(void) {
  char dir[] = "/tmp/tplua-test-digest.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[256];
  snprintf(path, sizeof path, "%s/million", dir);
  // One million 'a' spans 16 reads of 64 KiB: the streaming path, not one block.
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  for (int i = 0; i < 1000000; i++) {
    fputc('a', f);
  }
  fclose(f);
  char hex[TP_DIGEST_SHA256_HEX + 1];
  uint64_t size = 0;
  TpError err = {0};
  CHECK_INT(tp_digest_sha256_file(path, hex, &size, &err), 0);
  CHECK_STR(hex, MILLION_A);
  CHECK_INT(size, 1000000);

  char empty[256];
  snprintf(empty, sizeof empty, "%s/empty", dir);
  f = fopen(empty, "wb");
  fclose(f);
  CHECK_INT(tp_digest_sha256_file(empty, hex, &size, &err), 0);
  CHECK_STR(hex, EMPTY);
  CHECK_INT(size, 0);

  char missing[256];
  snprintf(missing, sizeof missing, "%s/missing", dir);
  CHECK_INT(tp_digest_sha256_file(missing, hex, &size, &err), -ENOENT);
  char want[512];
  snprintf(want, sizeof want, "%s: No such file or directory", missing);
  CHECK_STR(err.msg, want);
  CHECK_INT(tp_digest_sha256_file(dir, hex, NULL, &err), -EISDIR);

  unlink(path);
  unlink(empty);
  rmdir(dir);
}

// The pipe: one million 'a' pushed in blocks of uneven sizes from a ring of reused buffers
// (the reader's pattern) gives the FIPS vector; an empty input gives the empty digest.
static void test_pipe(void) {
  char hex[TP_DIGEST_SHA256_HEX + 1];
  TpError err = {0};
  TpDigestPipe *p = tp_digest_pipe_new("pipe", &err);
  CHECK(p != NULL);
  if (!p) {
    return;
  }
  enum { NBUF = 3, CAP = 7001 };
  static char bufs[NBUF][CAP];
  uint64_t tickets[NBUF] = {0};
  size_t left = 1000000, k = 0;
  while (left > 0) {
    if (tickets[k]) {
      tp_digest_pipe_wait(p, tickets[k]);
    }
    size_t n = left < CAP - k * 1000 ? left : CAP - k * 1000;
    memset(bufs[k], 'a', n);
    tickets[k] = tp_digest_pipe_push(p, bufs[k], n);
    left -= n;
    k = (k + 1) % NBUF;
  }
  CHECK_INT(tp_digest_pipe_finish(p, hex, &err), 0);
  CHECK_STR(hex, MILLION_A);
  p = tp_digest_pipe_new("pipe", &err);
  CHECK(p != NULL);
  if (p) {
    CHECK_INT(tp_digest_pipe_finish(p, hex, &err), 0);
    CHECK_STR(hex, EMPTY);
  }
  // Freed without finishing (a reader that failed part-way): the thread ends cleanly.
  p = tp_digest_pipe_new("pipe", &err);
  CHECK(p != NULL);
  if (p) {
    tp_digest_pipe_push(p, "abc", 3);
    tp_digest_pipe_free(p);
  }
  tp_digest_pipe_free(NULL);
}

int main(void) {
  test_strings();
  test_files();
  test_pipe();
  return CHECK_DONE();
}
