// tplua: the host. A look-alike of the standard `lua` interpreter (options, `arg`, LUA_INIT,
// errors with tracebacks, SIGINT) plus the built-in commands (stdlib/tp/cmd/*.lua) and a REPL
// with line editing, history and completion. A thin host over libtplua's public API
// (include/tplua.h): what it runs, it runs as any other host of the library would.
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "tplua.h"

#define PROGNAME    "tplua"
#define HISTORY_MAX 1000
#define MAXINPUT    4096  // longest line read without readline

// As lua.c: LUA_INIT_5_4 first, then LUA_INIT; '-' in a module name ends the global's name.
#define INIT_VAR         "LUA_INIT"
#define INIT_VAR_VERSION INIT_VAR "_" LUA_VERSION_MAJOR "_" LUA_VERSION_MINOR
#define IGNORE_MARK      '-'

// The SIGINT target (STYLE.md allows exactly this global state, as lua.c's globalL): the engine
// whose call a Ctrl-C interrupts. globalL is its state, for the REPL's completion.
static tplua_engine *g_engine = NULL;
static lua_State *globalL = NULL;
static const char *progname = PROGNAME;
// The status of an os.exit() called at the REPL or by -e / -l code (-1: none).
static int g_exit_status = -1;

// ---------------------------------------------------------------------------------------------
// Signals: SIGINT only asks the engine to stop (tplua_interrupt sets a hook; the hook raises the
// error on the engine's thread: never touch Lua in a handler). Armed only while a call runs.

static void on_sigint(int sig) {
  signal(sig, SIG_DFL);  // a second SIGINT kills the process
  tplua_interrupt(g_engine);
}

typedef void (*SigHandler)(int);

static SigHandler sigint_arm(void) {
  return signal(SIGINT, on_sigint);
}

static void sigint_disarm(SigHandler old) {
  signal(SIGINT, old);
}

// ---------------------------------------------------------------------------------------------
// Messages and calls

static void print_usage(FILE *out) {
  fprintf(out,
          "usage: %s [options] [script [args]]\n"
          "       %s COMMAND [args]      (see '%s help')\n"
          "Available options are:\n"
          "  -e stat   execute string 'stat'\n"
          "  -i        enter interactive mode after executing 'script'\n"
          "  -l mod    require library 'mod' into global 'mod'\n"
          "  -l g=mod  require library 'mod' into global 'g'\n"
          "  -v        show version information\n"
          "  -E        ignore environment variables\n"
          "  -W        turn warnings on\n"
          "  -h        show this help\n"
          "  --        stop handling options\n"
          "  -         stop handling options and execute stdin\n",
          progname, progname, progname);
  fflush(out);
}

static void l_message(const char *pname, const char *msg) {
  if (pname) {
    fprintf(stderr, "%s: ", pname);
  }
  fprintf(stderr, "%s\n", msg);
  fflush(stderr);
}

// Prints the error on top of the stack (a string after the engine's message handler) and pops
// it; an os.exit() status there is kept for the exit instead.
static int report(lua_State *L, int status) {
  if (status == TPLUA_EXIT) {
    g_exit_status = (int)(lua_tointeger(L, -1) & 0xFF);
    lua_pop(L, 1);
  } else if (status != TPLUA_OK) {
    const char *msg = lua_tostring(L, -1);
    l_message(progname, msg ? msg : "(error object is not a string)");
    lua_pop(L, 1);
  }
  return status;
}

// Calls the function under its `narg` arguments through the engine (traceback, os.exit, the
// interrupt) with SIGINT armed; returns a TPLUA_* status.
static int docall(lua_State *L, int narg, int nres) {
  (void)L;
  SigHandler old = sigint_arm();
  int status = tplua_pcall(g_engine, narg, nres);
  sigint_disarm(old);
  return status;
}

// The process exit status for a TPLUA_* status of a chunk run here.
static int exit_status_for(int status) {
  switch (status) {
    case TPLUA_OK:
      return EXIT_SUCCESS;
    case TPLUA_EXIT:
      return g_exit_status;
    case TPLUA_EINTERRUPTED:
      return 130;
    default:
      return EXIT_FAILURE;
  }
}

static void print_version(void) {
  printf("tplua %s (%s) stdlib: %s\n", tplua_version(), LUA_RELEASE, tplua_stdlib_dir(g_engine));
  fflush(stdout);
}

// Runs one of the engine's run calls with SIGINT armed; returns its exit status.
static int run_file(const char *path, int argc, char **argv) {
  SigHandler old = sigint_arm();
  int code = tplua_run_file(g_engine, path, argc, (const char *const *)argv);
  sigint_disarm(old);
  return code;
}

static int run_command(int argc, char **argv) {
  SigHandler old = sigint_arm();
  int code = tplua_run_command(g_engine, argc, (const char *const *)argv);
  sigint_disarm(old);
  return code;
}

// ---------------------------------------------------------------------------------------------
// The arg table, as lua.c builds it: arg[0] = script, options at negative indices.

static void createargtable(lua_State *L, char **argv, int argc, int script) {
  if (script == argc) {
    script = 0;  // no script: the program name goes to arg[0]
  }
  int narg = argc - (script + 1);
  lua_createtable(L, narg, script + 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

static int dochunk(lua_State *L, int status) {
  if (status == LUA_OK) {
    status = docall(L, 0, 0);
  } else {
    status = TPLUA_ERROR;  // the load error's message is on the stack
  }
  return report(L, status);
}

static int dofile(lua_State *L, const char *name) {
  return dochunk(L, luaL_loadfilex(L, name, "t"));
}

static int dostring(lua_State *L, const char *s, const char *name) {
  return dochunk(L, luaL_loadbufferx(L, s, strlen(s), name, "t"));
}

// -l [g=]mod: require 'mod' into global 'g'.
static int dolibrary(lua_State *L, char *globname) {
  char *modname = strchr(globname, '=');
  if (modname == NULL) {
    modname = globname;
    char *suffix = strchr(modname, IGNORE_MARK);
    if (suffix) {
      *suffix = '\0';  // the global name stops at the ignore mark
    }
  } else {
    *modname = '\0';
    modname++;
  }
  lua_getglobal(L, "require");
  lua_pushstring(L, modname);
  int status = docall(L, 1, 1);
  if (status == TPLUA_OK) {
    lua_setglobal(L, globname);
  }
  return report(L, status);
}

// The script: a file, or stdin for '-' (unless after '--'), with arg[1..n] as its arguments.
// Set when the script of `tplua -i script` called os.exit: the process then exits, as lua's does,
// instead of entering the prompt.
static int g_script_exited = 0;

// os.exit as the host installs it around `-i`'s script: notes the call, then the engine's own.
static int host_exit(lua_State *L) {
  g_script_exited = 1;
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

// Wraps os.exit with host_exit.
static void watch_exit(lua_State *L) {
  if (lua_getglobal(L, "os") == LUA_TTABLE) {
    lua_getfield(L, -1, "exit");  // [os, exit]
    lua_pushcclosure(L, host_exit, 1);
    lua_setfield(L, -2, "exit");
  }
  lua_pop(L, 1);
}

static int handle_script(lua_State *L, char **argv) {
  const char *fname = argv[0];
  if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0) {
    fname = NULL;  // stdin
  }
  int n = 0;
  if (lua_getglobal(L, "arg") == LUA_TTABLE) {
    n = (int)lua_rawlen(L, -1);
  }
  lua_pop(L, 1);
  return run_file(fname, n, argv + 1);
}

// ---------------------------------------------------------------------------------------------
// Options, as lua.c collects them.

enum { HAS_ERROR = 1, HAS_I = 2, HAS_V = 4, HAS_E = 8, HAS_BIGE = 16, HAS_H = 32 };

static int collectargs(char **argv, int *first) {
  int args = 0;
  int i;
  if (argv[0] != NULL) {
    if (argv[0][0]) {
      progname = argv[0];
    }
  } else {
    *first = -1;
    return 0;
  }
  for (i = 1; argv[i] != NULL; i++) {
    *first = i;
    if (argv[i][0] != '-') {
      return args;  // not an option: the script (or command)
    }
    switch (argv[i][1]) {
      case '-':
        if (argv[i][2] == '\0') {
          *first = i + 1;
          return args;
        }
        if (strcmp(argv[i], "--help") == 0) {
          args |= HAS_H;
          break;
        }
        return HAS_ERROR;
      case '\0':
        return args;  // '-': stdin as script
      case 'E':
        if (argv[i][2] != '\0') {
          return HAS_ERROR;
        }
        args |= HAS_BIGE;
        break;
      case 'W':
        if (argv[i][2] != '\0') {
          return HAS_ERROR;
        }
        break;
      case 'h':
        if (argv[i][2] != '\0') {
          return HAS_ERROR;
        }
        args |= HAS_H;
        break;
      case 'i':
        args |= HAS_I;  // -i implies -v
        // fall through
      case 'v':
        if (argv[i][2] != '\0') {
          return HAS_ERROR;
        }
        args |= HAS_V;
        break;
      case 'e':
        args |= HAS_E;
        // fall through
      case 'l':
        if (argv[i][2] == '\0') {
          i++;
          if (argv[i] == NULL || argv[i][0] == '-') {
            return HAS_ERROR;  // no argument after -e/-l
          }
        }
        break;
      default:
        return HAS_ERROR;
    }
  }
  *first = i;
  return args;
}

// Runs -e, -l and -W in order; returns 0 when one of them failed.
static int runargs(lua_State *L, char **argv, int n) {
  for (int i = 1; i < n; i++) {
    int option = argv[i][1];
    switch (option) {
      case 'e':
      case 'l': {
        char *extra = argv[i] + 2;
        if (*extra == '\0') {
          extra = argv[++i];
        }
        int status = option == 'e' ? dostring(L, extra, "=(command line)") : dolibrary(L, extra);
        if (status != TPLUA_OK) {
          return 0;
        }
        break;
      }
      case 'W':
        lua_warning(L, "@on", 0);
        break;
      default:
        break;
    }
  }
  return 1;
}

static int handle_luainit(lua_State *L) {
  const char *name = "=" INIT_VAR_VERSION;
  const char *init = getenv(name + 1);
  if (init == NULL) {
    name = "=" INIT_VAR;
    init = getenv(name + 1);
  }
  if (init == NULL) {
    return TPLUA_OK;
  }
  if (init[0] == '@') {
    return dofile(L, init + 1);
  }
  return dostring(L, init, name);
}

// ---------------------------------------------------------------------------------------------
// The REPL

static int repl_running = 0;

static const char *get_prompt(lua_State *L, int firstline) {
  if (lua_getglobal(L, firstline ? "_PROMPT" : "_PROMPT2") == LUA_TNIL) {
    lua_pop(L, 1);
    return lua_pushstring(L, firstline ? "tplua> " : ">> ");  // popped by pushline
  }
  const char *p = luaL_tolstring(L, -1, NULL);
  lua_remove(L, -2);  // keep the string on the stack
  return p;
}

// Reads one line into a new string on the stack; returns 0 at end of input.
static int pushline(lua_State *L, int firstline) {
  const char *prompt = get_prompt(L, firstline);
  char *line = NULL;
  if (isatty(STDIN_FILENO)) {
    line = readline(prompt);
  } else {
    static char buf[MAXINPUT];
    fputs(prompt, stdout);
    fflush(stdout);
    if (fgets(buf, sizeof buf, stdin)) {
      line = strdup(buf);
    }
  }
  lua_pop(L, 1);  // the prompt
  if (line == NULL) {
    return 0;
  }
  size_t l = strlen(line);
  if (l > 0 && line[l - 1] == '\n') {
    line[--l] = '\0';
  }
  if (firstline && line[0] == '=') {
    lua_pushfstring(L, "return %s", line + 1);  // 5.2 compatibility
  } else {
    lua_pushlstring(L, line, l);
  }
  free(line);
  return 1;
}

static const char *history_path(char *buf, size_t size) {
  const char *state = getenv("XDG_STATE_HOME");
  const char *home = getenv("HOME");
  char dir[PATH_MAX];
  int n;
  if (state && *state == '/') {
    n = snprintf(dir, sizeof dir, "%s/tplua", state);
  } else if (home && *home) {
    n = snprintf(dir, sizeof dir, "%s/.local/state/tplua", home);
  } else {
    return NULL;
  }
  if (n <= 0 || (size_t)n >= sizeof dir) {
    return NULL;
  }
  // mkdir -p
  for (char *p = dir + 1; *p; p++) {
    if (*p == '/') {
      *p = '\0';
      mkdir(dir, 0700);
      *p = '/';
    }
  }
  mkdir(dir, 0700);
  n = snprintf(buf, size, "%s/history", dir);
  return n > 0 && (size_t)n < size ? buf : NULL;
}

static char histfile[PATH_MAX];
static int have_histfile = 0;

static void history_add(const char *line) {
  if (!isatty(STDIN_FILENO) || line[0] == '\0') {
    return;
  }
  add_history(line);
  if (have_histfile) {
    FILE *f = fopen(histfile, "a");  // append each line: a crash loses nothing
    if (f) {
      fclose(f);
      append_history(1, histfile);
    }
  }
}

static int addreturn(lua_State *L) {
  const char *line = lua_tostring(L, -1);
  const char *retline = lua_pushfstring(L, "return %s;", line);
  int status = luaL_loadbufferx(L, retline, strlen(retline), "=stdin", "t");
  if (status == LUA_OK) {
    lua_remove(L, -2);  // the modified line
    history_add(line);
  } else {
    lua_pop(L, 2);  // the result and the modified line
  }
  return status;
}

static int incomplete(lua_State *L, int status) {
  if (status == LUA_ERRSYNTAX) {
    size_t lmsg;
    const char *msg = lua_tolstring(L, -1, &lmsg);
    static const char eof[] = "<eof>";
    if (lmsg >= sizeof eof - 1 && strcmp(msg + lmsg - (sizeof eof - 1), eof) == 0) {
      lua_pop(L, 1);
      return 1;
    }
  }
  return 0;
}

static int multiline(lua_State *L) {
  for (;;) {
    size_t len;
    const char *line = lua_tolstring(L, 1, &len);
    int status = luaL_loadbufferx(L, line, len, "=stdin", "t");
    if (!incomplete(L, status) || !pushline(L, 0)) {
      history_add(line);
      return status;
    }
    lua_pushliteral(L, "\n");
    lua_insert(L, -2);
    lua_concat(L, 3);
  }
}

// Reads a complete statement; returns -1 at end of input, else the load status (function or
// error message on the stack).
static int loadline(lua_State *L) {
  lua_settop(L, 0);
  if (!pushline(L, 1)) {
    return -1;
  }
  int status = addreturn(L);
  if (status != LUA_OK) {
    status = multiline(L);
  }
  lua_remove(L, 1);  // the line
  return status;
}

// Prints the values on the stack through tp.repl.print (pretty tables), else like print.
static void l_print(lua_State *L) {
  int n = lua_gettop(L);
  if (n == 0) {
    return;
  }
  luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
  lua_getglobal(L, "require");
  lua_pushliteral(L, "tp.present.repl");
  if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_istable(L, -1)) {
    lua_getfield(L, -1, "print");
    lua_remove(L, -2);
  } else {
    lua_pop(L, 1);
    lua_getglobal(L, "print");
  }
  lua_insert(L, 1);
  if (lua_pcall(L, n, 0, 0) != LUA_OK) {
    l_message(progname, lua_pushfstring(L, "error calling 'print' (%s)", lua_tostring(L, -1)));
  }
}

// Completion: the word before the cursor is `a.b.c` or `a.b:c`; candidates are the string keys
// of the table the prefix names (raw access only: no metamethod runs), of its __index tables and
// of their metatables' __complete tables.
static char **completion_matches = NULL;
static size_t completion_count = 0;

static void add_candidate(const char *s, size_t *cap) {
  if (completion_count + 1 >= *cap) {
    size_t ncap = *cap ? *cap * 2 : 32;
    char **p = realloc(completion_matches, ncap * sizeof *p);
    if (!p) {
      return;
    }
    completion_matches = p;
    *cap = ncap;
  }
  char *dup = strdup(s);
  if (dup) {
    completion_matches[completion_count++] = dup;
  }
}

static int is_ident(const char *s, size_t n) {
  if (n == 0 || !(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) {
    return 0;
  }
  for (size_t i = 1; i < n; i++) {
    char c = s[i];
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) {
      return 0;
    }
  }
  return 1;
}

// Adds the identifier keys of the table at `idx` that start with `partial` to the candidates, as
// `head .. key` (plus "(" when the value is a function).
static void add_keys(lua_State *L, int idx, const char *head, const char *partial, size_t *cap) {
  size_t plen = strlen(partial);
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    if (lua_type(L, -2) == LUA_TSTRING) {
      size_t klen;
      const char *key = lua_tolstring(L, -2, &klen);
      if (klen >= plen && strncmp(key, partial, plen) == 0 && is_ident(key, klen)) {
        const char *suffix = lua_type(L, -1) == LUA_TFUNCTION ? "(" : "";
        char *full = malloc(strlen(head) + klen + 2);
        if (full) {
          sprintf(full, "%s%s%s", head, key, suffix);
          add_candidate(full, cap);
          free(full);
        }
      }
    }
    lua_pop(L, 1);
  }
}

// Collects keys of the table at `idx` and of its metatable's __index chain (tables only: no
// metamethod runs). A metatable may also list names in a `__complete` table, for fields that a
// function __index provides (lazily loaded data, methods): its keys are offered as they are.
static void collect_keys(lua_State *L, int idx, const char *head, const char *partial,
                         size_t *cap) {
  idx = lua_absindex(L, idx);
  for (int depth = 0; depth < 8 && lua_istable(L, idx); depth++) {
    add_keys(L, idx, head, partial, cap);
    if (!lua_getmetatable(L, idx)) {
      break;
    }
    lua_pushliteral(L, "__complete");
    if (lua_rawget(L, -2) == LUA_TTABLE) {
      add_keys(L, lua_absindex(L, -1), head, partial, cap);
    }
    lua_pop(L, 1);
    // follow __index when it is a table
    lua_pushliteral(L, "__index");
    lua_rawget(L, -2);
    lua_remove(L, -2);
    if (!lua_istable(L, -1)) {
      lua_pop(L, 1);
      break;
    }
    idx = lua_absindex(L, -1);  // the chain's tables stay on the stack until settop below
  }
}

static char *completion_generator(const char *text, int state) {
  (void)text;
  static size_t next;
  if (state == 0) {
    next = 0;
  }
  if (next < completion_count) {
    char *m = completion_matches[next];
    completion_matches[next++] = NULL;
    return m;  // readline frees it
  }
  return NULL;
}

static char **tplua_completion(const char *text, int start, int end) {
  (void)start;
  (void)end;
  lua_State *L = globalL;
  rl_attempted_completion_over = 1;  // never fall back to file names
  for (size_t i = 0; i < completion_count; i++) {
    free(completion_matches[i]);
  }
  completion_count = 0;
  size_t cap = 0;
  free(completion_matches);
  completion_matches = NULL;
  if (!L) {
    return NULL;
  }
  int top = lua_gettop(L);
  if (!lua_checkstack(L, 32)) {
    return NULL;
  }
  // Split at the last '.' or ':'; walk the prefix from _G with raw gets.
  const char *sep = strpbrk(text, ".:") ? NULL : NULL;
  for (const char *p = text; *p; p++) {
    if (*p == '.' || *p == ':') {
      sep = p;
    }
  }
  lua_pushglobaltable(L);
  const char *partial = text;
  size_t headlen = 0;
  if (sep) {
    const char *seg = text;
    while (seg < sep) {
      const char *dot = seg;
      while (dot < sep && *dot != '.' && *dot != ':') {
        dot++;
      }
      if (!is_ident(seg, (size_t)(dot - seg))) {
        lua_settop(L, top);
        return NULL;
      }
      if (lua_istable(L, -1)) {
        lua_pushlstring(L, seg, (size_t)(dot - seg));
        lua_rawget(L, -2);
      } else if (lua_getmetatable(L, -1)) {  // userdata: look in its methods
        lua_pushliteral(L, "__index");
        lua_rawget(L, -2);
        if (!lua_istable(L, -1)) {
          lua_settop(L, top);
          return NULL;
        }
        lua_pushlstring(L, seg, (size_t)(dot - seg));
        lua_rawget(L, -2);
      } else {
        lua_settop(L, top);
        return NULL;
      }
      seg = dot + 1;
    }
    partial = sep + 1;
    headlen = (size_t)(partial - text);
    if (!lua_istable(L, -1)) {
      if (lua_getmetatable(L, -1)) {
        lua_pushliteral(L, "__index");
        lua_rawget(L, -2);
      } else {
        lua_settop(L, top);
        return NULL;
      }
    }
  }
  char head[512];
  if (headlen >= sizeof head) {
    lua_settop(L, top);
    return NULL;
  }
  memcpy(head, text, headlen);
  head[headlen] = '\0';
  collect_keys(L, -1, head, partial, &cap);
  if (!sep) {  // keywords too
    static const char *const keywords[] = {
        "and",      "break",  "do",   "else", "elseif", "end",   "false", "for",
        "function", "goto",   "if",   "in",   "local",  "nil",   "not",   "or",
        "repeat",   "return", "then", "true", "until",  "while", NULL};
    size_t plen = strlen(partial);
    for (int i = 0; keywords[i]; i++) {
      if (strncmp(keywords[i], partial, plen) == 0) {
        add_candidate(keywords[i], &cap);
      }
    }
  }
  lua_settop(L, top);
  if (completion_count == 0) {
    return NULL;
  }
  rl_completion_append_character = '\0';
  return rl_completion_matches(text, completion_generator);
}

static void repl_init(lua_State *L) {
  globalL = L;
  if (!isatty(STDIN_FILENO)) {
    return;
  }
  rl_readline_name = PROGNAME;
  rl_basic_word_break_characters = " \t\n\"\\'><=;+-*/%^~#{}()[],&|";
  rl_attempted_completion_function = tplua_completion;
  using_history();
  if (history_path(histfile, sizeof histfile)) {
    have_histfile = 1;
    read_history(histfile);
    history_truncate_file(histfile, HISTORY_MAX);
  }
}

// Runs the REPL until end of input.
static void doREPL(lua_State *L) {
  const char *oldprogname = progname;
  progname = NULL;  // errors print without the program name, as lua.c does
  repl_init(L);
  repl_running = 1;
  int status;
  while ((status = loadline(L)) != -1) {
    if (status == LUA_OK) {
      status = docall(L, 0, LUA_MULTRET);
    } else {
      status = TPLUA_ERROR;  // a syntax error, its message on the stack
    }
    if (status == TPLUA_OK) {
      l_print(L);
    } else {
      report(L, status);
      if (status == TPLUA_EXIT) {
        break;  // os.exit() at the prompt
      }
    }
  }
  repl_running = 0;
  lua_settop(L, 0);
  if (isatty(STDOUT_FILENO)) {
    fputc('\n', stdout);
  }
  fflush(stdout);
  progname = oldprogname;
}

// ---------------------------------------------------------------------------------------------
// What this host adds to tp._host: the interactive prompt.

// host.repl() -> nil: runs the interactive loop on this state until end of input (an os.exit()
// typed there ends the command that called it with that status).
static int host_repl(lua_State *L) {
  if (repl_running) {
    return luaL_error(L, "the REPL is already running");
  }
  doREPL(L);
  if (g_exit_status >= 0) {
    lua_getglobal(L, "os");
    lua_getfield(L, -1, "exit");
    lua_pushinteger(L, g_exit_status);
    g_exit_status = -1;
    lua_call(L, 1, 0);  // the engine's os.exit: raises, the command ends with the status
  }
  return 0;
}

static void install_host_repl(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "tp._host");
  if (docall(L, 1, 1) != TPLUA_OK) {
    report(L, TPLUA_ERROR);
    return;
  }
  lua_pushcfunction(L, host_repl);
  lua_setfield(L, -2, "repl");
  lua_pop(L, 1);
}

// ---------------------------------------------------------------------------------------------
// Main

// A built-in command name: lowercase letters, digits, '-' and '_', not a file.
static int is_command(const char *s) {
  struct stat st;
  if (stat(s, &st) == 0 && !S_ISDIR(st.st_mode)) {
    return 0;  // a file of that name is a script; a directory (report/, trace/) is no script
  }
  if (!(*s >= 'a' && *s <= 'z')) {
    return 0;
  }
  for (const char *p = s; *p; p++) {
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_')) {
      return 0;
    }
  }
  return 1;
}

typedef struct Cli {
  int argc;
  char **argv;
  int script;  // index of the script or command in argv (argc when none)
  int args;    // HAS_* flags
} Cli;

// Everything after the engine exists, run protected (as lua.c's pmain); pushes the exit status.
static int cli_main(lua_State *L) {
  const Cli *c = lua_touserdata(L, 1);
  char **argv = c->argv;
  int script = c->script;
  int args = c->args;
  createargtable(L, argv, c->argc, script);
  install_host_repl(L);
  if (args & HAS_H) {
    print_usage(stdout);
    lua_pushinteger(L, 0);
    return 1;
  }
  if (args & HAS_V) {
    print_version();
  }
  int status = (args & HAS_BIGE) ? TPLUA_OK : handle_luainit(L);
  if (status == TPLUA_OK && !runargs(L, argv, script)) {
    status = TPLUA_ERROR;
  }
  if (status != TPLUA_OK || g_exit_status >= 0) {
    lua_pushinteger(L, g_exit_status >= 0 ? g_exit_status : exit_status_for(status));
    return 1;
  }
  if (script > 0 && argv[script] != NULL) {
    if (strcmp(argv[script], "-") != 0 && strcmp(argv[script - 1], "--") != 0 &&
        is_command(argv[script])) {
      lua_pushinteger(L, run_command(c->argc - script, argv + script));
      return 1;
    }
    if (args & HAS_I) {
      watch_exit(L);
    }
    int code = handle_script(L, argv + script);
    if (code != EXIT_SUCCESS || g_script_exited) {
      lua_pushinteger(L, code);
      return 1;
    }
  }
  if (args & HAS_I) {
    doREPL(L);
  } else if (script < 1 || argv[script] == NULL) {
    if (!(args & (HAS_E | HAS_V))) {
      if (isatty(STDIN_FILENO)) {
        print_version();
        doREPL(L);
      } else {
        int code = run_file(NULL, 0, NULL);
        if (code != EXIT_SUCCESS) {
          lua_pushinteger(L, code);
          return 1;
        }
      }
    }
  }
  lua_pushinteger(L, g_exit_status >= 0 ? g_exit_status : EXIT_SUCCESS);
  return 1;
}

int main(int argc, char **argv) {
  Cli c = {.argc = argc, .argv = argv, .script = 0, .args = 0};
  c.args = collectargs(argv, &c.script);
  if (c.args == HAS_ERROR) {
    const char *bad = argv[c.script];
    if (bad && (bad[1] == 'e' || bad[1] == 'l')) {
      fprintf(stderr, "%s: '%s' needs argument\n", progname, bad);
    } else {
      fprintf(stderr, "%s: unrecognized option '%s'\n", progname, bad ? bad : "");
    }
    print_usage(stderr);
    return 2;
  }
  tplua_options opts;
  tplua_options_init(&opts);
  opts.progname = progname;
  opts.ignore_env = (c.args & HAS_BIGE) != 0;
  int status = tplua_new(&g_engine, &opts);
  if (status != TPLUA_OK) {
    l_message(argv[0], status == TPLUA_ENOMEM ? "cannot create state: not enough memory"
                                              : tplua_strerror(status));
    return EXIT_FAILURE;
  }
  lua_State *L = tplua_state(g_engine);
  globalL = L;
  int code = EXIT_FAILURE;
  lua_pushcfunction(L, cli_main);
  lua_pushlightuserdata(L, &c);
  if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
    code = (int)lua_tointeger(L, -1);
  } else {
    l_message(progname, lua_tostring(L, -1));
  }
  lua_pop(L, 1);
  fflush(stdout);
  tplua_close(g_engine);
  g_engine = NULL;
  return code;
}
