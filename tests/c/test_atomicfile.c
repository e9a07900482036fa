// Unit tests of engine/atomicfile: a streamed file appears whole at commit and never before; a
// failed write (file-size limit, EFBIG) or an abort leaves the old file and no temporary file.
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "atomicfile.h"
#include "check.h"

// Number of directory entries other than . and ..
static int entries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  }
  if (d) {
    closedir(d);
  }
  return n;
}

static long file_size(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    return -1;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  return n;
}

int main(void) {
  char dir[] = "/tmp/test_atomicfile.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[256];
  snprintf(path, sizeof path, "%s/out.json", dir);
  TpError err = {0};

  // Streamed in many pieces, more than one flush: nothing at the path until commit.
  TpAtomicFile f;
  CHECK_INT(tp_atomicfile_open(&f, path, 0644, &err), 0);
  static char block[4096];
  memset(block, 'x', sizeof block);
  for (int i = 0; i < 600; i++) {
    CHECK_INT(tp_atomicfile_write(&f, block, sizeof block, &err), 0);
  }
  CHECK_INT(file_size(path), -1);
  CHECK_INT(entries(dir), 1);
  CHECK_INT(tp_atomicfile_commit(&f, &err), 0);
  tp_atomicfile_abort(&f);
  CHECK_INT(file_size(path), 600 * 4096);
  CHECK_INT(entries(dir), 1);

  // Aborted: the old file stays, the temporary file goes.
  CHECK_INT(tp_atomicfile_open(&f, path, 0644, &err), 0);
  CHECK_INT(tp_atomicfile_write(&f, "new", 3, &err), 0);
  tp_atomicfile_abort(&f);
  tp_atomicfile_abort(&f);
  CHECK_INT(file_size(path), 600 * 4096);
  CHECK_INT(entries(dir), 1);

  // A write failure (file-size limit of 64 KiB, SIGXFSZ ignored: write returns EFBIG) is
  // sticky and reported by commit, which removes the temporary file.
  struct rlimit old, lim;
  getrlimit(RLIMIT_FSIZE, &old);
  lim = old;
  lim.rlim_cur = 65536;
  signal(SIGXFSZ, SIG_IGN);
  CHECK_INT(setrlimit(RLIMIT_FSIZE, &lim), 0);
  CHECK_INT(tp_atomicfile_open(&f, path, 0644, &err), 0);
  int rc = 0;
  for (int i = 0; i < 600 && rc == 0; i++) {
    rc = tp_atomicfile_write(&f, block, sizeof block, &err);
  }
  if (rc == 0) {
    rc = tp_atomicfile_commit(&f, &err);
  }
  CHECK_INT(rc, -EFBIG);
  CHECK(strstr(err.msg, "out.json: write: File too large") != NULL);
  CHECK(tp_atomicfile_commit(&f, &err) != 0);
  tp_atomicfile_abort(&f);
  setrlimit(RLIMIT_FSIZE, &old);
  CHECK_INT(file_size(path), 600 * 4096);
  CHECK_INT(entries(dir), 1);

  // A directory that does not exist: open fails, nothing to abort.
  char bad[300];
  snprintf(bad, sizeof bad, "%s/missing/out.json", dir);
  CHECK(tp_atomicfile_open(&f, bad, 0644, &err) < 0);
  CHECK(strstr(err.msg, "cannot create temporary file") != NULL);
  tp_atomicfile_abort(&f);

  unlink(path);
  rmdir(dir);
  return CHECK_DONE();
}
