// A C host of libtplua: runs a recipe (or a campaign) as `tplua run RECIPE ARGS...` would, and
// shows the run's progress through its own callback instead of the engine's output. Ctrl-C
// stops the recipe cleanly (the runs are journalled; running it again resumes).
//
//   cc -o host examples/embed/host.c $(pkg-config --cflags --libs tplua)
//   ./host examples/campaign/fake.lua --results out/fake
#define _POSIX_C_SOURCE 200809L  // setenv

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tplua.h>

static tplua_engine *engine;  // the engine a Ctrl-C interrupts

static void on_sigint(int sig) {
  (void)sig;
  tplua_interrupt(engine);  // safe in a signal handler
}

// Every line the engine writes: keep the runs' progress and the errors, drop the rest.
static void on_line(void *user, int stream, const char *line, size_t len) {
  int *lines = user;
  ++*lines;
  if (stream == TPLUA_STREAM_ERR) {
    fprintf(stderr, "host: engine error: %.*s\n", (int)len, line);
  } else if (memchr(line, ':', len) && (strstr(line, "started") || strstr(line, "finished") ||
                                        strstr(line, "FAILED") || strstr(line, "campaign:"))) {
    printf("progress: %.*s\n", (int)len, line);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s RECIPE.lua [ARGS...]\n", argv[0]);
    return 2;
  }
  if (tplua_version_number() / 10000 != TPLUA_VERSION_MAJOR) {
    fprintf(stderr, "host: built for libtplua %s, found %s\n", TPLUA_VERSION_STRING,
            tplua_version());
    return 1;
  }
  setenv("TERM", "dumb", 1);  // plain progress lines: the live view redraws in place on a tty
  FILE *quiet = fopen("/dev/null", "w");  // the engine's own output: only the callback sees it
  int lines = 0;
  tplua_options opts;
  tplua_options_init(&opts);
  opts.out = quiet;
  opts.log = on_line;
  opts.log_user = &lines;
  opts.progname = "host";
  int rc = tplua_new(&engine, &opts);
  if (rc != TPLUA_OK) {
    fprintf(stderr, "host: cannot create the engine: %s\n", tplua_strerror(rc));
    return 1;
  }
  // `tplua run RECIPE ARGS...`: argv[1..] after the command's name.
  const char *args[64];
  int n = 0;
  args[n++] = "run";
  for (int i = 1; i < argc && n < 63; i++) {
    args[n++] = argv[i];
  }
  signal(SIGINT, on_sigint);
  int status = tplua_run_command(engine, n, args);
  signal(SIGINT, SIG_DFL);
  printf("host: exit status %d, %d lines from the engine\n", status, lines);
  tplua_close(engine);
  fclose(quiet);
  return status < 0 ? 1 : status;
}
