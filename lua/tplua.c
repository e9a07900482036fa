// tplua: the host. A look-alike of the standard `lua` interpreter (options, `arg`, LUA_INIT,
// errors with tracebacks, SIGINT) plus the built-in commands (stdlib/tp/cmd/*.lua) and a REPL
// with line editing, history and completion.
#include <errno.h>
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

#include "proc.h"

#define PROGNAME    "tplua"
#define HISTORY_MAX 1000
#define MAXINPUT    4096  // longest line read without readline

// As lua.c: LUA_INIT_5_4 first, then LUA_INIT; '-' in a module name ends the global's name.
#define INIT_VAR         "LUA_INIT"
#define INIT_VAR_VERSION INIT_VAR "_" LUA_VERSION_MAJOR "_" LUA_VERSION_MINOR
#define IGNORE_MARK      '-'

// The SIGINT target (STYLE.md allows exactly this global state, as lua.c's globalL).
static lua_State *globalL = NULL;
static volatile sig_atomic_t g_interrupted = 0;
static const char *progname = PROGNAME;

// Registered C modules (generated from lua/l_*.c).
#define TPLUA_MODULE(name) int luaopen_tp__##name(lua_State *L);
#include "tplua_modules.h"
#undef TPLUA_MODULE

static const struct {
  const char *name;
  lua_CFunction open;
} modules[] = {
#define TPLUA_MODULE(name) {"tp._" #name, luaopen_tp__##name},
#include "tplua_modules.h"
#undef TPLUA_MODULE
    {NULL, NULL},
};

// Registry key of the stdlib directory in use (a string).
static const char stdlib_key = 0;

// ---------------------------------------------------------------------------------------------
// Signals: SIGINT only installs a hook; the hook raises the error (never touch Lua in a handler).

static void lstop(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  g_interrupted = 1;
  luaL_error(L, "interrupted");
}

static void laction(int sig) {
  int flag = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
  signal(sig, SIG_DFL);  // a second SIGINT kills the process
  lua_sethook(globalL, lstop, flag, 1);
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

// Prints the error on top of the stack (already a string after msghandler) and pops it.
static int report(lua_State *L, int status) {
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    l_message(progname, msg ? msg : "(error object is not a string)");
    lua_pop(L, 1);
  }
  return status;
}

// Message handler: turns any error object into a string with a traceback.
static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) {
      return 1;  // an object with its own message: no traceback (as lua.c)
    }
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

// Calls the function under its `narg` arguments with the traceback handler and SIGINT armed.
static int docall(lua_State *L, int narg, int nres) {
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  globalL = L;
  g_interrupted = 0;
  tp_proc_interrupted_clear();
  void (*old)(int) = signal(SIGINT, laction);
  int status = lua_pcall(L, narg, nres, base);
  signal(SIGINT, old);
  lua_remove(L, base);
  return status;
}

static int exit_status_for(int status) {
  if (status == LUA_OK) {
    return EXIT_SUCCESS;
  }
  return g_interrupted ? 130 : EXIT_FAILURE;
}

static void print_version(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &stdlib_key);
  const char *dir = lua_tostring(L, -1);
  printf("tplua %s (%s) stdlib: %s\n", TPLUA_VERSION, LUA_RELEASE, dir ? dir : "(none)");
  lua_pop(L, 1);
  fflush(stdout);
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
  if (status == LUA_OK) {
    lua_setglobal(L, globname);
  }
  return report(L, status);
}

// Pushes the script arguments (arg[1..n]) and returns n.
static int pushargs(lua_State *L) {
  if (lua_getglobal(L, "arg") != LUA_TTABLE) {
    luaL_error(L, "'arg' is not a table");
  }
  int n = (int)luaL_len(L, -1);
  luaL_checkstack(L, n + 3, "too many arguments to script");
  int i;
  for (i = 1; i <= n; i++) {
    lua_rawgeti(L, -i, i);
  }
  lua_remove(L, -i);
  return n;
}

static int handle_script(lua_State *L, char **argv) {
  const char *fname = argv[0];
  if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0) {
    fname = NULL;  // stdin
  }
  int status = luaL_loadfilex(L, fname, "t");
  if (status == LUA_OK) {
    int n = pushargs(L);
    status = docall(L, n, LUA_MULTRET);
  }
  return report(L, status);
}

// Runs a built-in command through tp.cmd.main(name, args); returns the process exit status.
static int handle_command(lua_State *L, char **argv, int argc) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "tp.cmd");
  int status = docall(L, 1, 1);
  if (status != LUA_OK) {
    report(L, status);
    return exit_status_for(status);
  }
  lua_getfield(L, -1, "main");
  lua_remove(L, -2);
  lua_pushstring(L, argv[0]);
  lua_createtable(L, argc - 1, 0);
  for (int i = 1; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i);
  }
  status = docall(L, 2, 1);
  if (status != LUA_OK) {
    report(L, status);
    return exit_status_for(status);
  }
  int isnum = 0;
  lua_Integer code = lua_tointegerx(L, -1, &isnum);
  lua_pop(L, 1);
  if (!isnum) {
    return EXIT_SUCCESS;
  }
  return code < 0 || code > 255 ? EXIT_FAILURE : (int)code;
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
        if (status != LUA_OK) {
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
    return LUA_OK;
  }
  if (init[0] == '@') {
    return dofile(L, init + 1);
  }
  return dostring(L, init, name);
}

// ---------------------------------------------------------------------------------------------
// Finding the stdlib (STYLE.md §1): TPLUA_PATH, <exe>/../share/tplua/lua, the source tree, the
// compiled-in install prefix. The chosen directory is prepended to package.path.

static int has_stdlib(const char *dir) {
  char probe[PATH_MAX];
  int n = snprintf(probe, sizeof probe, "%s/tp/init.lua", dir);
  struct stat st;
  return n > 0 && (size_t)n < sizeof probe && stat(probe, &st) == 0 && S_ISREG(st.st_mode);
}

static int exe_dir(char *out, size_t size) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    return 0;
  }
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (!slash) {
    return 0;
  }
  *slash = '\0';
  int w = snprintf(out, size, "%s", exe);
  return w > 0 && (size_t)w < size;
}

// Modules that moved into packages (stdlib/tp/_moved.lua maps old name -> new name): `require
// 'tp.config'` loads 'tp.plan.config', the same table. The searcher comes right after the preload
// one, so an old name never finds a stale file of that name further down the user's path.
static int moved_loader(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_call(L, 1, 1);
  return 1;
}

static int moved_searcher(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  if (strncmp(name, "tp.", 3) != 0 || strcmp(name, "tp._moved") == 0) {
    return 0;
  }
  lua_getglobal(L, "require");
  lua_pushliteral(L, "tp._moved");
  if (lua_pcall(L, 1, 1, 0) != LUA_OK || !lua_istable(L, -1)) {
    return 0;  // a stdlib without the map (TPLUA_PATH at a test tree): nothing moved
  }
  if (lua_getfield(L, -1, name) != LUA_TSTRING) {
    lua_pushfstring(L, "no module '%s' in tp._moved", name);
    return 1;
  }
  lua_pushcclosure(L, moved_loader, 1);  // the loader closes over the new name
  lua_getfield(L, -2, name);             // its second value: the new name
  return 2;
}

static void add_moved_searcher(lua_State *L) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "searchers");
  for (lua_Integer i = (lua_Integer)lua_rawlen(L, -1); i >= 2; i--) {
    lua_rawgeti(L, -1, i);
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushcfunction(L, moved_searcher);
  lua_rawseti(L, -2, 2);
  lua_pop(L, 2);
}

static void set_stdlib_path(lua_State *L, int ignore_env) {
  char candidate[PATH_MAX];
  const char *dir = NULL;
  const char *env = ignore_env ? NULL : getenv("TPLUA_PATH");
  if (env && *env) {
    dir = env;  // trusted as given, even if it lacks tp/ (tests point it at fixtures)
  }
  if (!dir) {
    char exedir[PATH_MAX];
    if (exe_dir(exedir, sizeof exedir)) {
      int n = snprintf(candidate, sizeof candidate, "%s/../share/tplua/lua", exedir);
      if (n > 0 && (size_t)n < sizeof candidate && has_stdlib(candidate)) {
        char *real = realpath(candidate, NULL);
        if (real) {
          snprintf(candidate, sizeof candidate, "%s", real);
          free(real);
        }
        dir = candidate;
      }
    }
  }
  if (!dir && has_stdlib(TPLUA_SOURCE_STDLIB)) {
    dir = TPLUA_SOURCE_STDLIB;
  }
  if (!dir) {
    dir = TPLUA_INSTALL_STDLIB;
  }
  lua_pushstring(L, dir);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &stdlib_key);

  lua_getglobal(L, "package");  // [package]
  lua_getfield(L, -1, "path");  // [package, path]
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
  lua_setfield(L, -3, "path");
  lua_pop(L, 2);
}

static void register_modules(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);  // [preload]
  for (int i = 0; modules[i].name; i++) {
    lua_pushcfunction(L, modules[i].open);
    lua_setfield(L, -2, modules[i].name);
  }
  lua_pop(L, 1);
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
    }
    if (status == LUA_OK) {
      l_print(L);
    } else {
      report(L, status);
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
// tp._host: what Lua code may ask of the host.

// host.repl() -> nil: runs the interactive loop on this state until end of input.
static int host_repl(lua_State *L) {
  if (repl_running) {
    return luaL_error(L, "the REPL is already running");
  }
  doREPL(L);
  return 0;
}

// host.stdlib_dir() -> string
static int host_stdlib_dir(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &stdlib_key);
  return 1;
}

// host.exe_path() -> string | nil
static int host_exe_path(lua_State *L) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    luaL_pushfail(L);
    return 1;
  }
  lua_pushlstring(L, exe, (size_t)n);
  return 1;
}

// host.interrupted() -> 'SIGINT' | 'SIGTERM' | false: whether the last call was interrupted, by
// the SIGINT hook here or by a signal a tp.proc loop caught and forwarded (engine/proc.c).
static int host_interrupted(lua_State *L) {
  int sig = g_interrupted ? SIGINT : tp_proc_interrupted();
  if (sig) {
    lua_pushstring(L, tp_proc_signal_name(sig));
  } else {
    lua_pushboolean(L, 0);
  }
  return 1;
}

static int luaopen_tp__host(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"exe_path", host_exe_path},
      {"interrupted", host_interrupted},
      {"repl", host_repl},
      {"stdlib_dir", host_stdlib_dir},
      {NULL, NULL},
  };
  luaL_newlib(L, funcs);
  lua_pushliteral(L, TPLUA_VERSION);
  lua_setfield(L, -2, "version");
  lua_pushliteral(L, LUA_RELEASE);
  lua_setfield(L, -2, "lua_version");
  return 1;
}

// ---------------------------------------------------------------------------------------------
// Main

// A built-in command name: lowercase letters, digits, '-' and '_', not a file.
static int is_command(const char *s) {
  struct stat st;
  if (stat(s, &st) == 0) {
    return 0;
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

static int pmain(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = (char **)lua_touserdata(L, 2);
  int script = 0;
  int args = collectargs(argv, &script);
  luaL_checkversion(L);
  if (args == HAS_ERROR) {
    const char *bad = argv[script];
    if (bad && (bad[1] == 'e' || bad[1] == 'l')) {
      fprintf(stderr, "%s: '%s' needs argument\n", progname, bad);
    } else {
      fprintf(stderr, "%s: unrecognized option '%s'\n", progname, bad ? bad : "");
    }
    print_usage(stderr);
    lua_pushinteger(L, 2);
    return 1;
  }
  if (args & HAS_BIGE) {
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  }
  luaL_openlibs(L);
  register_modules(L);
  luaL_requiref(L, "tp._host", luaopen_tp__host, 0);
  lua_pop(L, 1);
  set_stdlib_path(L, args & HAS_BIGE);
  add_moved_searcher(L);
  createargtable(L, argv, argc, script);
  const char *stress = (args & HAS_BIGE) ? NULL : getenv("TPLUA_GC_STRESS");
  if (stress && *stress && strcmp(stress, "0") != 0) {
    lua_gc(L, LUA_GCINC, 1, 1000, 0);  // about one cycle per allocation: flushes missing anchors
  } else {
    lua_gc(L, LUA_GCGEN, 0, 0);
  }
  if (args & HAS_H) {
    print_usage(stdout);
    lua_pushinteger(L, 0);
    return 1;
  }
  if (args & HAS_V) {
    print_version(L);
  }
  if (!(args & HAS_BIGE) && handle_luainit(L) != LUA_OK) {
    lua_pushinteger(L, exit_status_for(LUA_ERRRUN));
    return 1;
  }
  if (!runargs(L, argv, script)) {
    lua_pushinteger(L, exit_status_for(LUA_ERRRUN));
    return 1;
  }
  if (script > 0 && argv[script] != NULL) {
    if (strcmp(argv[script], "-") != 0 && strcmp(argv[script - 1], "--") != 0 &&
        is_command(argv[script])) {
      lua_pushinteger(L, handle_command(L, argv + script, argc - script));
      return 1;
    }
    int status = handle_script(L, argv + script);
    if (status != LUA_OK) {
      lua_pushinteger(L, exit_status_for(status));
      return 1;
    }
  }
  if (args & HAS_I) {
    doREPL(L);
  } else if (script < 1 || argv[script] == NULL) {
    if (!(args & (HAS_E | HAS_V))) {
      if (isatty(STDIN_FILENO)) {
        print_version(L);
        doREPL(L);
      } else {
        int status = dofile(L, NULL);
        if (status != LUA_OK) {
          lua_pushinteger(L, exit_status_for(status));
          return 1;
        }
      }
    }
  }
  lua_pushinteger(L, EXIT_SUCCESS);
  return 1;
}

int main(int argc, char **argv) {
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    l_message(argv[0], "cannot create state: not enough memory");
    return EXIT_FAILURE;
  }
  lua_pushcfunction(L, pmain);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  int status = lua_pcall(L, 2, 1, 0);
  int code = EXIT_FAILURE;
  if (status == LUA_OK) {
    code = (int)lua_tointeger(L, -1);
  } else {
    report(L, status);
  }
  fflush(stdout);
  lua_close(L);
  return code;
}
