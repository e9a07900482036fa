// engine/store and engine/fs: atomic replace (whole and streamed), journal lines, mkdir -p,
// listing, glob, realpath. A streamed file appears whole at commit and never before; a failed
// write (file-size limit, EFBIG) or an abort leaves the old file and no temporary file.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "fs.h"
#include "store.h"

static char tmpdir[256];

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    return NULL;
  }
  char *buf = malloc(1 << 16);
  size_t n = fread(buf, 1, (1 << 16) - 1, f);
  fclose(f);
  buf[n] = '\0';
  *len = n;
  return buf;
}

static int count_entries(const char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
  FILE *p = popen(cmd, "r");
  int n = -1;
  if (p) {
    if (fscanf(p, "%d", &n) != 1) {
      n = -1;
    }
    pclose(p);
  }
  return n;
}

static void test_atomic(void) {
  char path[512];
  snprintf(path, sizeof path, "%s/a.json", tmpdir);
  TpError err = {0};
  CHECK_INT(tp_store_write_atomic(path, "first", 5, 0644, &err), 0);
  CHECK_INT(tp_store_write_atomic(path, "second!", 7, 0600, &err), 0);
  size_t len = 0;
  char *s = slurp(path, &len);
  CHECK_STR(s, "second!");
  free(s);
  struct stat st;
  CHECK_INT(stat(path, &st), 0);
  CHECK_INT(st.st_mode & 0777, 0600);
  CHECK_INT(count_entries(tmpdir), 1);  // no temporary file left behind

  // A target in a missing directory fails cleanly and names the path.
  char bad[512];
  snprintf(bad, sizeof bad, "%s/missing/x.json", tmpdir);
  CHECK(tp_store_write_atomic(bad, "x", 1, 0644, &err) == -ENOENT);
  CHECK(strstr(err.msg, "missing/x.json") != NULL);
  CHECK_STR(tp_error_name(err.code), "ENOENT");

  // Renaming over a directory fails; the temporary file is removed.
  char dir[512];
  snprintf(dir, sizeof dir, "%s/adir", tmpdir);
  CHECK_INT(mkdir(dir, 0755), 0);
  CHECK(tp_store_write_atomic(dir, "x", 1, 0644, &err) < 0);
  CHECK_INT(count_entries(tmpdir), 2);  // a.json and adir only
}

static long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static void test_file(void) {
  char dir[300];
  snprintf(dir, sizeof dir, "%s/file", tmpdir);
  CHECK(mkdir(dir, 0755) == 0);
  char path[320];
  snprintf(path, sizeof path, "%s/out.json", dir);
  TpError err = {0};

  // Streamed in many pieces, more than one flush: nothing at the path until commit.
  TpStoreFile f;
  CHECK_INT(tp_store_file_open(&f, path, 0644, &err), 0);
  static char block[4096];
  memset(block, 'x', sizeof block);
  for (int i = 0; i < 600; i++) {
    CHECK_INT(tp_store_file_write(&f, block, sizeof block, &err), 0);
  }
  CHECK_INT(file_size(path), -1);
  CHECK_INT(count_entries(dir), 1);
  CHECK_INT(tp_store_file_commit(&f, &err), 0);
  tp_store_file_abort(&f);
  CHECK_INT(file_size(path), 600 * 4096);
  CHECK_INT(count_entries(dir), 1);

  // Aborted: the old file stays, the temporary file goes.
  CHECK_INT(tp_store_file_open(&f, path, 0644, &err), 0);
  CHECK_INT(tp_store_file_write(&f, "new", 3, &err), 0);
  tp_store_file_abort(&f);
  tp_store_file_abort(&f);
  CHECK_INT(file_size(path), 600 * 4096);
  CHECK_INT(count_entries(dir), 1);

  // A write failure (file-size limit of 64 KiB, SIGXFSZ ignored: write returns EFBIG) is
  // sticky and reported by commit, which removes the temporary file.
  struct rlimit old, lim;
  getrlimit(RLIMIT_FSIZE, &old);
  lim = old;
  lim.rlim_cur = 65536;
  signal(SIGXFSZ, SIG_IGN);
  CHECK_INT(setrlimit(RLIMIT_FSIZE, &lim), 0);
  CHECK_INT(tp_store_file_open(&f, path, 0644, &err), 0);
  int rc = 0;
  for (int i = 0; i < 600 && rc == 0; i++) {
    rc = tp_store_file_write(&f, block, sizeof block, &err);
  }
  if (rc == 0) {
    rc = tp_store_file_commit(&f, &err);
  }
  CHECK_INT(rc, -EFBIG);
  CHECK(strstr(err.msg, "out.json: write: File too large") != NULL);
  CHECK(tp_store_file_commit(&f, &err) != 0);
  tp_store_file_abort(&f);
  setrlimit(RLIMIT_FSIZE, &old);
  CHECK_INT(file_size(path), 600 * 4096);
  CHECK_INT(count_entries(dir), 1);

  // A directory that does not exist: open fails, nothing to abort.
  char bad[360];
  snprintf(bad, sizeof bad, "%s/missing/out.json", dir);
  CHECK(tp_store_file_open(&f, bad, 0644, &err) < 0);
  CHECK(strstr(err.msg, "cannot create temporary file") != NULL);
  tp_store_file_abort(&f);
  unlink(path);
  rmdir(dir);
}

static void test_journal(void) {
  char path[512];
  snprintf(path, sizeof path, "%s/journal.jsonl", tmpdir);
  TpError err = {0};
  CHECK_INT(tp_store_append_line(path, "{\"a\":1}", 7, &err), 0);
  CHECK_INT(tp_store_append_line(path, "{\"b\":2}", 7, &err), 0);
  size_t len = 0;
  char *s = slurp(path, &len);
  CHECK_STR(s, "{\"a\":1}\n{\"b\":2}\n");
  free(s);
  CHECK_INT(tp_store_append_line(path, "x\ny", 3, &err), TP_EINVAL);
  CHECK(strstr(err.msg, "newline") != NULL);
}

static int listed;
static void on_entry(const char *name, TpFsType type, void *ud) {
  (void)ud;
  if (listed == 0) {
    CHECK_STR(name, "a.json");
    CHECK_INT(type, TP_FS_FILE);
  } else if (listed == 1) {
    CHECK_STR(name, "adir");
    CHECK_INT(type, TP_FS_DIR);
  }
  listed++;
}

static int globbed;
static void on_glob(const char *p, void *ud) {
  (void)ud;
  CHECK(strstr(p, ".json") != NULL);
  globbed++;
}

static void test_fs(void) {
  TpError err = {0};
  char deep[512];
  snprintf(deep, sizeof deep, "%s/x/y/z", tmpdir);
  CHECK_INT(tp_fs_mkdir_p(deep, 0755, &err), 0);
  CHECK_INT(tp_fs_mkdir_p(deep, 0755, &err), 0);  // existing: fine
  char file[512];
  snprintf(file, sizeof file, "%s/a.json", tmpdir);
  CHECK_INT(tp_fs_mkdir_p(file, 0755, &err), -EEXIST);
  CHECK(strstr(err.msg, "not a directory") != NULL);

  TpFsStat st;
  CHECK_INT(tp_fs_stat(file, false, &st, &err), 0);
  CHECK_INT(st.type, TP_FS_FILE);
  CHECK_INT(st.size, 7);
  CHECK_INT(tp_fs_stat("/nonexistent/zz", false, &st, &err), -ENOENT);
  CHECK(strstr(err.msg, "/nonexistent/zz: No such file") != NULL);

  listed = 0;
  CHECK_INT(tp_fs_list(tmpdir, on_entry, NULL, &err), 0);
  CHECK_INT(listed, 4);  // a.json adir journal.jsonl x (sorted)
  CHECK(tp_fs_list(file, on_entry, NULL, &err) == -ENOTDIR);

  char pat[512];
  snprintf(pat, sizeof pat, "%s/*.json*", tmpdir);
  globbed = 0;
  CHECK_INT(tp_fs_glob(pat, on_glob, NULL, &err), 0);
  CHECK_INT(globbed, 2);
  snprintf(pat, sizeof pat, "%s/*.none", tmpdir);
  globbed = 0;
  CHECK_INT(tp_fs_glob(pat, on_glob, NULL, &err), 0);
  CHECK_INT(globbed, 0);

  char rel[512];
  snprintf(rel, sizeof rel, "%s/x/../a.json", tmpdir);
  char *real = tp_fs_realpath(rel, &err);
  CHECK(real != NULL && strstr(real, "/a.json") != NULL && strstr(real, "..") == NULL);
  free(real);
  CHECK(tp_fs_realpath("/nonexistent/q", &err) == NULL);
  CHECK_INT(err.code, -ENOENT);

  // Whole-file reads: a regular file in one read, NUL-terminated, with its stat.
  char *data = NULL;
  size_t len = 0;
  CHECK_INT(tp_fs_read_file(file, 1024, &data, &len, &st, &err), 0);
  CHECK_INT(len, 7);
  CHECK(data != NULL && data[7] == '\0');
  CHECK_INT(st.type, TP_FS_FILE);
  free(data);
  CHECK_INT(tp_fs_read_file(file, 6, &data, &len, NULL, &err), TP_ELIMIT);
  CHECK(strstr(err.msg, "a.json: file is 7 bytes, above max_size (6 bytes)") != NULL);
  CHECK(data == NULL);
  CHECK_INT(tp_fs_read_file(tmpdir, 1024, &data, &len, NULL, &err), -EISDIR);
  CHECK_INT(tp_fs_read_file("/nonexistent/zz", 1024, &data, &len, NULL, &err), -ENOENT);
  CHECK(strstr(err.msg, "/nonexistent/zz: No such file") != NULL);
  // procfs reports size 0 for its files: the buffer grows as the bytes come.
  CHECK_INT(tp_fs_read_file("/proc/self/status", 1 << 20, &data, &len, NULL, &err), 0);
  CHECK(len > 100 && strstr(data, "Name:") == data);
  free(data);
  CHECK_INT(tp_fs_read_file("/proc/self/status", 10, &data, &len, NULL, &err), TP_ELIMIT);
  CHECK(strstr(err.msg, "status: more than max_size (10 bytes)") != NULL);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/tplua-test-store.XXXXXX");
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  test_atomic();
  test_file();
  test_journal();
  test_fs();
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) {
    fprintf(stderr, "cleanup failed\n");
  }
  return CHECK_DONE();
}
