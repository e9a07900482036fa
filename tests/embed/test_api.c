// libtplua's public API as a C host uses it (include/tplua.h, linked with the shared library):
// versions, options, streams and the log callback, exit statuses, os.exit, errors as codes and
// messages, protected calls, commands, a log to its record, a trace to its breakdown, and
// interrupts from another thread, from a signal handler and between calls.
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "check.h"
#include "tplua.h"

static const char *source_dir;

static char *path_of(const char *rel) {
  static char buf[4][4096];
  static int next;
  char *p = buf[next++ % 4];
  snprintf(p, sizeof buf[0], "%s/%s", source_dir, rel);
  return p;
}

// The text of f (rewound), malloc'd.
static char *slurp(FILE *f) {
  fflush(f);
  long n = ftell(f);
  char *s = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
  rewind(f);
  if (n > 0 && fread(s, 1, (size_t)n, f) != (size_t)n) {
    s[0] = '\0';
  }
  fseek(f, 0, SEEK_END);
  return s;
}

// JSON text without spaces and newlines, so that `"a":[1,2]` matches however it was indented.
static char *squeeze(const char *s) {
  char *out = malloc(strlen(s) + 1);
  size_t o = 0;
  for (; *s; s++) {
    if (*s != ' ' && *s != '\n') {
      out[o++] = *s;
    }
  }
  out[o] = '\0';
  return out;
}

static int contains_json(const char *json, const char *want) {
  char *sq = squeeze(json);
  int yes = strstr(sq, want) != NULL;
  if (!yes) {
    fprintf(stderr, "not found in the JSON: %s\n", want);
  }
  free(sq);
  return yes;
}

// ---------------------------------------------------------------------------------------------
// The log callback: lines kept in order, and a semaphore posted on the line "started".

typedef struct Lines {
  char text[8192];
  size_t len;
  int out_lines, err_lines;
  sem_t started;
} Lines;

static void on_line(void *user, int stream, const char *line, size_t len) {
  Lines *l = user;
  if (stream == TPLUA_STREAM_OUT) {
    l->out_lines++;
  } else if (stream == TPLUA_STREAM_ERR) {
    l->err_lines++;
  }
  int n = snprintf(l->text + l->len, sizeof l->text - l->len, "%c:%.*s|",
                   stream == TPLUA_STREAM_OUT ? 'o' : 'e', (int)len, line);
  if (n > 0 && l->len + (size_t)n < sizeof l->text) {
    l->len += (size_t)n;
  }
  if (len == 7 && memcmp(line, "started", 7) == 0) {
    sem_post(&l->started);
  }
}

static tplua_engine *new_engine(FILE *out, FILE *err, Lines *lines) {
  tplua_options o;
  tplua_options_init(&o);
  o.out = out;
  o.err = err;
  o.log = lines ? on_line : NULL;
  o.log_user = lines;
  o.progname = "host";
  tplua_engine *T = NULL;
  CHECK_INT(tplua_new(&T, &o), TPLUA_OK);
  return T;
}

// ---------------------------------------------------------------------------------------------

static void test_versions(void) {
  CHECK_INT(tplua_version_number(), TPLUA_VERSION_NUMBER);
  CHECK_STR(tplua_version(), TPLUA_VERSION_STRING);
  char v[32];
  snprintf(v, sizeof v, "%d.%d.%d", TPLUA_VERSION_MAJOR, TPLUA_VERSION_MINOR, TPLUA_VERSION_PATCH);
  CHECK_STR(v, TPLUA_VERSION_STRING);
  CHECK_STR(tplua_strerror(TPLUA_EINTERRUPTED), "interrupted");
  CHECK_STR(tplua_strerror(TPLUA_OK), "ok");
  CHECK_STR(tplua_strerror(-5), "unknown status");
}

static void test_options(void) {
  CHECK_INT(tplua_new(NULL, NULL), TPLUA_EINVAL);
  tplua_engine *T = (tplua_engine *)&T;  // not NULL: tplua_new must clear it on failure
  struct {
    tplua_options o;
    char newer[16];
  } big;
  memset(&big, 0, sizeof big);
  tplua_options_init(&big.o);
  big.o.size = sizeof big;  // a newer host whose extra fields are unset: accepted
  CHECK_INT(tplua_new(&T, &big.o), TPLUA_OK);
  CHECK(T != NULL);
  tplua_close(T);
  big.newer[3] = 1;  // ... and one that needs a field this library lacks: refused
  CHECK_INT(tplua_new(&T, &big.o), TPLUA_EVERSION);
  CHECK(T == NULL);
  tplua_options o;
  tplua_options_init(&o);
  o.size = 2;
  CHECK_INT(tplua_new(&T, &o), TPLUA_EINVAL);

  // The stdlib directory: given, else TPLUA_PATH (unless ignore_env), else found.
  tplua_options_init(&o);
  o.stdlib_dir = path_of("stdlib");
  CHECK_INT(tplua_new(&T, &o), TPLUA_OK);
  CHECK_STR(tplua_stdlib_dir(T), path_of("stdlib"));
  tplua_close(T);
  setenv("TPLUA_PATH", "/nonexistent/tplua-path", 1);
  tplua_options_init(&o);
  CHECK_INT(tplua_new(&T, &o), TPLUA_OK);
  CHECK_STR(tplua_stdlib_dir(T), "/nonexistent/tplua-path");
  tplua_close(T);
  o.ignore_env = 1;
  CHECK_INT(tplua_new(&T, &o), TPLUA_OK);
  CHECK(strcmp(tplua_stdlib_dir(T), "/nonexistent/tplua-path") != 0);
  CHECK_INT(tplua_run_string(T, "assert(require('tp').version)", NULL), 0);
  tplua_close(T);
  unsetenv("TPLUA_PATH");
  tplua_close(NULL);
  tplua_free(NULL);
}

static void test_streams(void) {
  FILE *out = tmpfile(), *err = tmpfile();
  Lines lines;
  memset(&lines, 0, sizeof lines);
  sem_init(&lines.started, 0, 0);
  tplua_engine *T = new_engine(out, err, &lines);
  CHECK_INT(tplua_run_string(T,
                             "print('hello', 42) io.write('a\\nb') io.stdout:write('c\\n') "
                             "io.stderr:write('warn\\n')",
                             "=streams"),
            0);
  char *o = slurp(out), *e = slurp(err);
  CHECK_STR(o, "hello\t42\na\nbc\n");
  CHECK_STR(e, "warn\n");
  free(o);
  free(e);
  CHECK_STR(lines.text, "o:hello\t42|o:a|o:bc|e:warn|");
  CHECK_INT(tplua_run_string(T, "io.write('tail without newline')", NULL), 0);
  tplua_close(T);  // the last partial line reaches the callback at close
  CHECK(strstr(lines.text, "o:tail without newline|") != NULL);
  sem_destroy(&lines.started);
  fclose(out);
  fclose(err);
}

static void test_statuses(void) {
  FILE *out = tmpfile(), *err = tmpfile();
  tplua_engine *T = new_engine(out, err, NULL);
  CHECK_INT(tplua_run_string(T, "x = 1", NULL), 0);
  CHECK_STR(tplua_errmsg(T), "");

  CHECK_INT(tplua_run_string(T, "error('boom')", "=chunk"), 1);
  CHECK(strstr(tplua_errmsg(T), "chunk:1: boom") != NULL);
  CHECK(strstr(tplua_errmsg(T), "stack traceback:") != NULL);
  char *e = slurp(err);
  CHECK(strncmp(e, "host: chunk:1: boom", 19) == 0);
  free(e);

  CHECK_INT(tplua_run_string(T, "x = = 1", "=syntax"), 1);
  CHECK(strstr(tplua_errmsg(T), "syntax:1:") != NULL);

  CHECK_INT(tplua_run_string(T, "os.exit(7)", NULL), 7);
  CHECK_INT(tplua_run_string(T, "os.exit(true)", NULL), 0);
  CHECK_INT(tplua_run_string(T, "os.exit(false)", NULL), 1);
  CHECK_INT(tplua_run_string(T, "assert(x == 1); os.exit(3, true)", NULL), 3);  // still usable

  CHECK_INT(tplua_run_string(NULL, "x = 1", NULL), -TPLUA_EINVAL);
  CHECK_INT(tplua_run_string(T, NULL, NULL), -TPLUA_EINVAL);
  CHECK_INT(tplua_run_file(T, NULL, 1, NULL), -TPLUA_EINVAL);
  CHECK_INT(tplua_run_command(T, 0, NULL), -TPLUA_EINVAL);

  // A file with arguments, as `tplua FILE x y` runs it.
  char script[] = "/tmp/tplua-api-XXXXXX";
  int fd = mkstemp(script);
  const char body[] = "assert(arg[0] == ...) ; local n = select('#', ...)\n"
                      "assert(arg[1] == 'x' and arg[2] == 'y' and arg[3] == nil)\n"
                      "os.exit(n == 2 and select(2, ...) == 'y' and 5 or 6)\n";
  CHECK(fd >= 0 && write(fd, body, sizeof body - 1) == (ssize_t)(sizeof body - 1));
  close(fd);
  const char *args[] = {"x", "y"};
  CHECK_INT(tplua_run_string(T, "arg = {[-1] = '-e', [0] = 'old', 'a', 'b', 'c'}", NULL), 0);
  // arg[1] == ... fails: arg[0] is the path, the first vararg 'x'; the script says so.
  CHECK_INT(tplua_run_file(T, script, 2, args), 1);
  CHECK(strstr(tplua_errmsg(T), "assertion failed") != NULL);
  FILE *f = fopen(script, "w");
  fprintf(f, "assert(arg[0] == '%s' and arg[-1] == '-e')\n%s", script, body + 24);
  fclose(f);
  CHECK_INT(tplua_run_file(T, script, 2, args), 5);
  unlink(script);
  CHECK_INT(tplua_run_file(T, "/nonexistent/script.lua", 0, NULL), 1);
  CHECK(strstr(tplua_errmsg(T), "cannot open /nonexistent/script.lua") != NULL);

  // Commands, as the binary runs them.
  rewind(out);
  const char *help[] = {"help"};
  CHECK_INT(tplua_run_command(T, 1, help), 0);
  char *o = slurp(out);
  CHECK(strstr(o, "commands:") != NULL && strstr(o, "extract") != NULL);
  free(o);
  const char *unknown[] = {"no-such-command"};
  CHECK_INT(tplua_run_command(T, 1, unknown), 2);
  tplua_close(T);
  fclose(out);
  fclose(err);
}

static void test_pcall(void) {
  tplua_engine *T = NULL;
  CHECK_INT(tplua_new(&T, NULL), TPLUA_OK);
  lua_State *L = tplua_state(T);
  CHECK(L != NULL);
  int top = lua_gettop(L);
  CHECK_INT(luaL_loadstring(L, "local a, b = ... return a + b, require('tp.json').encode({1})"),
            LUA_OK);
  lua_pushinteger(L, 40);
  lua_pushinteger(L, 2);
  CHECK_INT(tplua_pcall(T, 2, 2), TPLUA_OK);
  CHECK_INT(lua_tointeger(L, -2), 42);
  CHECK_STR(lua_tostring(L, -1), "[1]");
  lua_pop(L, 2);
  CHECK_INT(luaL_loadstring(L, "error({})"), LUA_OK);
  CHECK_INT(tplua_pcall(T, 0, 0), TPLUA_ERROR);
  CHECK_STR(lua_tostring(L, -1), tplua_errmsg(T));
  CHECK(strstr(tplua_errmsg(T), "(error object is a table value)") != NULL);
  lua_pop(L, 1);
  CHECK_INT(luaL_loadstring(L, "os.exit(9)"), LUA_OK);
  CHECK_INT(tplua_pcall(T, 0, 0), TPLUA_EXIT);
  CHECK_INT(lua_tointeger(L, -1), 9);
  lua_pop(L, 1);
  CHECK_INT(tplua_pcall(T, 3, 0), TPLUA_EINVAL);  // nothing to call
  CHECK_INT(lua_gettop(L), top);
  tplua_close(T);
}

// ---------------------------------------------------------------------------------------------
// Interrupts

typedef struct Interrupter {
  tplua_engine *T;
  Lines *lines;
  pthread_t target;  // when set: interrupt by a signal sent to this thread
} Interrupter;

static tplua_engine *g_signal_engine;  // the signal handler's target

static void on_usr1(int sig) {
  (void)sig;
  tplua_interrupt(g_signal_engine);
}

static void *interrupter(void *arg) {
  Interrupter *i = arg;
  sem_wait(&i->lines->started);  // the loop runs: it printed "started"
  if (i->target) {
    pthread_kill(i->target, SIGUSR1);
  } else {
    tplua_interrupt(i->T);
  }
  return NULL;
}

static void test_interrupt(void) {
  FILE *out = tmpfile(), *err = tmpfile();
  Lines lines;
  memset(&lines, 0, sizeof lines);
  sem_init(&lines.started, 0, 0);
  tplua_engine *T = new_engine(out, err, &lines);
  const char *loop = "print('started') local n = 0 while true do n = n + 1 end";

  Interrupter by_thread = {.T = T, .lines = &lines};
  pthread_t th;
  pthread_create(&th, NULL, interrupter, &by_thread);
  CHECK_INT(tplua_run_string(T, loop, "=loop"), 130);
  pthread_join(th, NULL);
  CHECK(strstr(tplua_errmsg(T), "interrupted") != NULL);
  CHECK_INT(tplua_run_string(T, "assert(require('tp._host').interrupted() == false)", NULL), 0);

  g_signal_engine = T;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);
  Interrupter by_signal = {.T = T, .lines = &lines, .target = pthread_self()};
  pthread_create(&th, NULL, interrupter, &by_signal);
  lua_State *L = tplua_state(T);
  CHECK_INT(luaL_loadstring(L, loop), LUA_OK);
  CHECK_INT(tplua_pcall(T, 0, 0), TPLUA_EINTERRUPTED);
  lua_pop(L, 1);
  pthread_join(th, NULL);
  signal(SIGUSR1, SIG_DFL);

  // Between calls: the next call stops at its start, the one after runs.
  tplua_interrupt(T);
  CHECK_INT(tplua_run_string(T, "y = 1", NULL), 130);
  CHECK_INT(tplua_run_string(T, "y = 2", NULL), 0);
  tplua_close(T);
  sem_destroy(&lines.started);
  fclose(out);
  fclose(err);
}

// ---------------------------------------------------------------------------------------------
// A log to its record, a trace to its breakdown. Expected values: the fixtures' EXPECTED.md and
// expected.json, written from the logs and by an independent oracle.

static void test_extract_and_trace(void) {
  FILE *out = tmpfile(), *err = tmpfile();
  Lines lines;
  memset(&lines, 0, sizeof lines);
  tplua_engine *T = new_engine(out, err, &lines);
  char *json = (char *)&json;
  const char *log = path_of("tests/fixtures/logs/megatron/issue756_mixtral_memory_report.log");
  CHECK_INT(tplua_extract(T, log, NULL, &json), TPLUA_OK);
  CHECK_STR(tplua_errmsg(T), "");
  CHECK(json != NULL);
  if (json) {
    CHECK(contains_json(json, "\"schema\":\"tplua.run/2\""));
    CHECK(contains_json(json, "\"iterations\":[2,3]"));
    CHECK(contains_json(json, "\"loss_values\":[2.02153,2.003316]"));
    tplua_free(json);
  }
  const char *flags[] = {"--platform", "nvd", "--run-id", "api-1", NULL};
  CHECK_INT(tplua_extract(T, log, flags, &json), TPLUA_OK);
  if (json) {
    CHECK(contains_json(json, "\"platform\":\"nvd\""));
    CHECK(contains_json(json, "\"run_id\":\"api-1\""));
    tplua_free(json);
  }
  CHECK_INT(tplua_extract(T, "/nonexistent/run.log", NULL, &json), TPLUA_EFAIL);
  CHECK(json == NULL);
  CHECK(strstr(tplua_errmsg(T), "/nonexistent/run.log") != NULL);
  const char *bad[] = {"--platform", "tpu", NULL};
  CHECK_INT(tplua_extract(T, log, bad, &json), TPLUA_EINVAL);
  CHECK(strstr(tplua_errmsg(T), "--platform") != NULL);
  CHECK(strchr(tplua_errmsg(T), '\n') == NULL);
  // No scratch directory: the message names where it was asked for and why not.
  const char *tmpdir = getenv("TMPDIR");
  char *saved = tmpdir ? strdup(tmpdir) : NULL;
  setenv("TMPDIR", "/nonexistent/tmp", 1);
  CHECK_INT(tplua_extract(T, log, NULL, &json), TPLUA_EFAIL);
  CHECK(json == NULL);
  CHECK(strstr(tplua_errmsg(T), "scratch directory in /nonexistent/tmp (TMPDIR): No such file") !=
        NULL);
  if (saved) {
    setenv("TMPDIR", saved, 1);
    free(saved);
  } else {
    unsetenv("TMPDIR");
  }
  CHECK_INT(tplua_extract(T, NULL, NULL, &json), TPLUA_EINVAL);
  CHECK_INT(tplua_extract(T, log, NULL, NULL), TPLUA_EINVAL);
  CHECK_INT(tplua_extract(NULL, log, NULL, &json), TPLUA_EINVAL);

  const char *trace = path_of("tests/fixtures/traces/bert_small_h100.json.gz");
  CHECK_INT(tplua_trace(T, trace, NULL, &json), TPLUA_OK);
  if (json) {
    CHECK(contains_json(json, "\"busy\":309437"));  // expected.json: step 6, busy_ns
    CHECK(contains_json(json, "\"idle\":3598388"));
    tplua_free(json);
  }
  CHECK_INT(tplua_trace(T, "/nonexistent/trace.json", NULL, &json), TPLUA_EFAIL);
  CHECK(strstr(tplua_errmsg(T), "/nonexistent/trace.json") != NULL);

  // Nothing of it reached the engine's streams or the callback.
  char *o = slurp(out), *e = slurp(err);
  CHECK_STR(o, "");
  CHECK_STR(e, "");
  CHECK_INT(lines.out_lines + lines.err_lines, 0);
  free(o);
  free(e);
  // ... which are still the engine's: io.stdout was put back.
  CHECK_INT(tplua_run_string(T, "io.stdout:write('back\\n') print('again')", NULL), 0);
  o = slurp(out);
  CHECK_STR(o, "back\nagain\n");
  free(o);
  tplua_close(T);
  fclose(out);
  fclose(err);
}

// Two engines in one thread share nothing.
static void test_two_engines(void) {
  tplua_engine *A = NULL, *B = NULL;
  CHECK_INT(tplua_new(&A, NULL), TPLUA_OK);
  CHECK_INT(tplua_new(&B, NULL), TPLUA_OK);
  CHECK_INT(tplua_run_string(A, "shared = 'a'; require('tp.json').marker = 1", NULL), 0);
  CHECK_INT(tplua_run_string(B, "os.exit(shared == nil and 0 or 1)", NULL), 0);
  CHECK_INT(tplua_run_string(B, "os.exit(require('tp.json').marker == nil and 0 or 1)", NULL), 0);
  tplua_close(A);
  CHECK_INT(tplua_run_string(B, "assert(require('tp.json').encode({1}) == '[1]')", NULL), 0);
  tplua_close(B);
}

int main(void) {
  source_dir = getenv("TPLUA_SOURCE_DIR");
  if (!source_dir) {
    source_dir = ".";
  }
  test_versions();
  test_options();
  test_streams();
  test_statuses();
  test_pcall();
  test_interrupt();
  test_extract_and_trace();
  test_two_engines();
  return CHECK_DONE();
}
