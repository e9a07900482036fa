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

// The follower: a file growing while it is followed (the reader's pattern: write, advance),
// one million 'a' in uneven steps, gives the FIPS vector, also when the digest is asked for
// twice; the digest covers the bytes reported, not the ones written after; a file that shrinks
// below them is an error; a follower freed before it is done stops cleanly; a pipe's bytes are
// hashed from the reader's buffer.
static void test_follow(void) {
  char dir[] = "/tmp/tplua-test-follow.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[256];
  snprintf(path, sizeof path, "%s/grows", dir);
  FILE *f = fopen(path, "w+b");  // the follower reads through its own copy of the descriptor
  CHECK(f != NULL);
  if (!f) {
    return;
  }
  char hex[TP_DIGEST_SHA256_HEX + 1];
  TpError err = {0};
  TpDigestFollow *fl = tp_digest_follow_new(fileno(f), path, &err);
  CHECK(fl != NULL);
  if (!fl) {
    fclose(f);
    return;
  }
  static char block[60000];
  memset(block, 'a', sizeof block);
  uint64_t total = 0;
  for (int step = 0; total < 1000000; step++) {
    size_t n = 1000 + (size_t)step * 1531 % 50000;
    if (n > 1000000 - total) {
      n = (size_t)(1000000 - total);
    }
    CHECK_INT(fwrite(block, 1, n, f), n);
    fflush(f);
    total += n;
    tp_digest_follow_advance(fl, block, n);
  }
  // Bytes after the end reported are not the digest's.
  CHECK_INT(fwrite("bbb", 1, 3, f), 3);
  fflush(f);
  tp_digest_follow_end(fl);
  CHECK_INT(tp_digest_follow_wait(fl, hex, &err), 0);
  CHECK_STR(hex, MILLION_A);
  CHECK_INT(tp_digest_follow_wait(fl, hex, &err), 0);
  CHECK_STR(hex, MILLION_A);
  tp_digest_follow_free(fl);

  // Waiting without reporting the end first reports it (no wait for ever).
  {
    char part[600];
    snprintf(part, sizeof part, "%s.part", path);
    FILE *pf = fopen(part, "w+b");
    CHECK(pf != NULL);
    if (pf) {
      CHECK_INT(fwrite("xyzabc", 1, 6, pf), 6);
      fflush(pf);
      fl = tp_digest_follow_new(fileno(pf), part, &err);
      CHECK(fl != NULL);
      if (fl) {
        tp_digest_follow_advance(fl, "xyz", 3);
        CHECK_INT(tp_digest_follow_wait(fl, hex, &err), 0);
        CHECK_STR(hex, "3608bca1e44ea6c4d268eb6db02260269892c0b42b86bbf1e77a6fa16c3c9282");
        tp_digest_follow_free(fl);
      }
      fclose(pf);
      unlink(part);
    }
  }

  // Nothing read: the empty digest.
  fl = tp_digest_follow_new(fileno(f), path, &err);
  CHECK(fl != NULL);
  if (fl) {
    tp_digest_follow_end(fl);
    CHECK_INT(tp_digest_follow_wait(fl, hex, &err), 0);
    CHECK_STR(hex, EMPTY);
    tp_digest_follow_free(fl);
  }

  // The file shrinks below what was reported read.
  fl = tp_digest_follow_new(fileno(f), path, &err);
  CHECK(fl != NULL);
  if (fl) {
    CHECK_INT(ftruncate(fileno(f), 500000), 0);
    for (int k = 0; k < 20; k++) {
      tp_digest_follow_advance(fl, block, 50000);
    }
    tp_digest_follow_end(fl);
    CHECK_INT(tp_digest_follow_wait(fl, hex, &err), TP_EINVAL);
    char want[512];
    snprintf(want, sizeof want,
             "%s: the file shrank while it was read (it ends at byte 500000, 1000000 bytes were "
             "read)",
             path);
    CHECK_STR(err.msg, want);
    tp_digest_follow_free(fl);
  }

  // Freed part-way (a reader that failed) or before any byte: the thread stops.
  fl = tp_digest_follow_new(fileno(f), path, &err);
  CHECK(fl != NULL);
  if (fl) {
    tp_digest_follow_advance(fl, block, 40000);
    tp_digest_follow_free(fl);
  }
  fl = tp_digest_follow_new(fileno(f), path, &err);
  CHECK(fl != NULL);
  tp_digest_follow_free(fl);
  tp_digest_follow_free(NULL);

  // A pipe cannot be read with pread: the bytes reported are hashed as they come, whatever
  // becomes of the buffer after each call.
  int fds[2];
  CHECK_INT(pipe(fds), 0);
  fl = tp_digest_follow_new(fds[0], "pipe", &err);
  CHECK(fl != NULL);
  if (fl) {
    static char chunk[7001];
    for (size_t left = 1000000; left > 0;) {
      size_t n = left < sizeof chunk ? left : sizeof chunk;
      memset(chunk, 'a', n);
      tp_digest_follow_advance(fl, chunk, n);
      memset(chunk, 'z', sizeof chunk);
      left -= n;
    }
    tp_digest_follow_end(fl);
    CHECK_INT(tp_digest_follow_wait(fl, hex, &err), 0);
    CHECK_STR(hex, MILLION_A);
    tp_digest_follow_free(fl);
  }
  close(fds[0]);
  close(fds[1]);

  // A descriptor that is not open.
  CHECK(tp_digest_follow_new(-1, "nofd", &err) == NULL);
  CHECK_INT(err.code, -EBADF);
  fclose(f);
  unlink(path);
  rmdir(dir);
}

int main(void) {
  test_strings();
  test_files();
  test_pipe();
  test_follow();
  return CHECK_DONE();
}
