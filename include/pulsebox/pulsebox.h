/* pulsebox.h: the plain-C ABI of libpulsebox (C11, includable from C++),
 * for C and for the languages that bind C (cgo, ctypes, Rust FFI).
 *
 * Usage, in call order:
 *   pulsebox_sandbox* sb = NULL;
 *   pulsebox_error* err = NULL;
 *   if (pulsebox_sandbox_new("/home/me/project", "{\"limits\": {\"memory\": \"512M\"}}", &sb,
 *                            &err) != PULSEBOX_OK) { ...pulsebox_error_message(err)...; }
 *   const char* argv[] = {"make", "test", NULL};
 *   pulsebox_result* res = NULL;
 *   pulsebox_sandbox_run(sb, argv, NULL, &res, &err);      // NULL options: the defaults
 *   const char* tx = pulsebox_result_transaction_id(res);  // NULL: nothing changed
 *   if (tx) pulsebox_commit(sb, tx, NULL, &err);            // or pulsebox_diff first
 *   pulsebox_result_free(res);
 *   pulsebox_sandbox_free(sb);
 *
 * A sandbox made here behaves as `pulsebox run` does (docs/cli.md): SHELL
 * is allowed unless a "policy" says otherwise, the run's workspace changes
 * are kept as a transaction for review (pulsebox_diff, pulsebox_commit,
 * pulsebox_discard) unless "changes" says commit or discard, a limit or
 * policy this host cannot enforce strongly is refused
 * (PULSEBOX_ERROR_UNSUPPORTED_POLICY) unless "allow_weaker" accepts it, and
 * the user's and the workspace's config files apply (docs/config.md).
 *
 * Options (pulsebox_sandbox_new): a JSON object with the field names and
 * shapes of the protocol's run request (docs/protocol.md "A run"):
 *   "policy" (an action policy object), "limits" {"memory", "swap", "pids",
 *   "cpus", "timeout", "cpu_time", "max_output", "disk"}, "network" {"mode",
 *   "allow", "allow_domains"}, "secrets" {NAME: VALUE} (given to the command
 *   and scrubbed from everything it writes), "env" {NAME: VALUE}, "seccomp",
 *   "changes" ("keep", "commit", "discard"), "session", "allow_weaker"
 *   (["limits", ...] or ["all"]), "profile", "approvals" (below).
 * Any other field is refused (PULSEBOX_ERROR_INVALID_FIELD naming it); the
 * run request's per-run fields (argv, cwd, stdin, execution_id) are
 * pulsebox_sandbox_run's arguments. NULL or "" means {}.
 *
 * Approvals: an ASK decision of the action policy is put to the run's
 * on_approval callback; without one it is denied (PULSEBOX_ERROR_POLICY_DENIED).
 * "approvals": "allow" approves every ASK without asking, "deny" denies
 * every ASK without asking.
 *
 * Errors: every function that can fail returns a pulsebox_status; PULSEBOX_OK
 * (0) is success. On failure, when `error` is not NULL, *error receives a
 * pulsebox_error (the code, a message, the field or path concerned, and for a
 * commit conflict the paths that changed) that the caller frees with
 * pulsebox_error_free. On success *error is left NULL. No C++ exception
 * crosses this ABI: every failure, an allocation failure included, is a
 * status. The codes are the protocol's (docs/protocol.md "Errors"):
 * pulsebox_status_name() gives the same words ("invalid_field", ...).
 *
 * Ownership: what a function hands back through an out-parameter is the
 * caller's, freed with the function named beside it (pulsebox_sandbox_free,
 * pulsebox_result_free, pulsebox_error_free, pulsebox_string_free,
 * pulsebox_string_list_free); each accepts NULL. A `const char*` returned by
 * an accessor is borrowed: it stays valid until the object it came from is
 * freed. Byte strings (output, a diff, a file) come with their length, since
 * they may hold NUL bytes, and are NUL-terminated as well.
 *
 * Threads: distinct sandboxes may be used from distinct threads at once;
 * one sandbox is used by one thread at a time (calls on it are not
 * synchronised). Results and errors are immutable and may be read from any
 * thread. Callbacks run on the thread that called pulsebox_sandbox_run,
 * during that call, and must not call into the same sandbox.
 *
 * Stability: PULSEBOX_ABI_VERSION counts incompatible changes of this ABI
 * (pulsebox_abi_version() gives the loaded library's); the soname,
 * libpulsebox.so.0, changes only with one. Within one
 * ABI version functions and enum values are only added, and
 * pulsebox_run_options only grows at its end (its struct_size says which
 * fields the caller knows). Link with `pkg-config --cflags --libs pulsebox`.
 */
#ifndef PULSEBOX_PULSEBOX_H
#define PULSEBOX_PULSEBOX_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PULSEBOX_ABI_VERSION 1

/* Opaque handles. */
typedef struct pulsebox_sandbox pulsebox_sandbox;
typedef struct pulsebox_result pulsebox_result;
typedef struct pulsebox_error pulsebox_error;
typedef struct pulsebox_string_list pulsebox_string_list;

/* One code per protocol error code that an in-process call can give. */
typedef enum pulsebox_status {
  PULSEBOX_OK = 0,
  /* A NULL or malformed argument, options that are not a JSON object. */
  PULSEBOX_ERROR_INVALID_REQUEST = 1,
  /* An option's value; pulsebox_error_field names it ("limits.memory"). */
  PULSEBOX_ERROR_INVALID_FIELD = 2,
  /* The action policy said DENY, or an ASK was denied. */
  PULSEBOX_ERROR_POLICY_DENIED = 3,
  /* A policy this host cannot enforce strongly ("allow_weaker" accepts less). */
  PULSEBOX_ERROR_UNSUPPORTED_POLICY = 4,
  /* A request that would break isolation (a system directory as the workspace, ...). */
  PULSEBOX_ERROR_SECURITY = 5,
  /* No backend may run the command. */
  PULSEBOX_ERROR_UNAVAILABLE = 6,
  /* The workspace changed under a commit: pulsebox_error_path lists what. */
  PULSEBOX_ERROR_CONFLICT = 7,
  /* No such transaction. */
  PULSEBOX_ERROR_NOT_FOUND = 8,
  /* Beyond a size limit (staged bytes, ...). */
  PULSEBOX_ERROR_TOO_LARGE = 9,
  /* A failure of pulsebox's own (leftovers needing `pulsebox reconcile` included). */
  PULSEBOX_ERROR_INTERNAL = 10
} pulsebox_status;

typedef enum pulsebox_stream { PULSEBOX_STDOUT = 1, PULSEBOX_STDERR = 2 } pulsebox_stream;

/* The library's version ("0.1.0"): static, never freed. */
const char* pulsebox_version(void);
/* The ABI version the library implements: compare with PULSEBOX_ABI_VERSION. */
int pulsebox_abi_version(void);
/* The protocol's name of a status ("ok", "invalid_field", ...): static. */
const char* pulsebox_status_name(pulsebox_status status);

/* Errors (all accessors accept NULL and then return 0, "" or NULL). */
pulsebox_status pulsebox_error_code(const pulsebox_error* error);
const char* pulsebox_error_message(const pulsebox_error* error);
/* The option or argument concerned ("limits.memory", "transaction"), or NULL. */
const char* pulsebox_error_field(const pulsebox_error* error);
/* PULSEBOX_ERROR_CONFLICT: the workspace paths that changed. */
size_t pulsebox_error_path_count(const pulsebox_error* error);
const char* pulsebox_error_path(const pulsebox_error* error, size_t index);
void pulsebox_error_free(pulsebox_error* error);

/* Strings and lists handed to the caller. */
void pulsebox_string_free(char* text);
size_t pulsebox_string_list_count(const pulsebox_string_list* list);
const char* pulsebox_string_list_get(const pulsebox_string_list* list, size_t index);
void pulsebox_string_list_free(pulsebox_string_list* list);

/* A sandbox over `workspace` (a host directory, shown at /workspace) with
 * `options_json` (above). The options are checked here, each error naming
 * its field. *out is freed with pulsebox_sandbox_free. */
pulsebox_status pulsebox_sandbox_new(const char* workspace, const char* options_json,
                                     pulsebox_sandbox** out, pulsebox_error** error);
void pulsebox_sandbox_free(pulsebox_sandbox* sandbox);

/* Scrubbed output as it arrives (a chunk may end inside a UTF-8 character). */
typedef void (*pulsebox_output_fn)(void* user_data, pulsebox_stream stream, const char* bytes,
                                   size_t length);
/* An ASK decision: `request_json` is {"action", "target", "decision", "rule",
 * "reason", "execution_id", "workspace"}. Non-zero approves. */
typedef int (*pulsebox_approval_fn)(void* user_data, const char* request_json);

typedef struct pulsebox_run_options {
  size_t struct_size;       /* sizeof(pulsebox_run_options): set by pulsebox_run_options_init */
  const char* cwd;          /* relative to the workspace; NULL: the workspace */
  const char* execution_id; /* [A-Za-z0-9][A-Za-z0-9._-]{0,63}, not *.lock; NULL: one is made */
  const char* stdin_data;   /* the command's stdin; NULL: /dev/null */
  size_t stdin_length;
  int cancel_fd; /* readable or hung up: the run is cancelled; -1: none. Not owned */
  void* user_data;
  pulsebox_output_fn on_output;     /* NULL: output only in the result */
  pulsebox_approval_fn on_approval; /* NULL: an ASK is denied */
} pulsebox_run_options;

/* Every field empty, cancel_fd -1, struct_size set. */
void pulsebox_run_options_init(pulsebox_run_options* options);

/* Runs argv (NULL-terminated; argv[0] looked up in the sandbox's PATH) in the
 * sandbox. A command that fails is a result, not an error: errors are
 * refusals (policy, options, enforcement) and failures of pulsebox's own.
 * `options` may be NULL. *out is freed with pulsebox_result_free. */
pulsebox_status pulsebox_sandbox_run(pulsebox_sandbox* sandbox, const char* const* argv,
                                     const pulsebox_run_options* options, pulsebox_result** out,
                                     pulsebox_error** error);

/* A run's result (accessors return borrowed pointers, see Ownership). */
/* The command's exit code as `pulsebox run --json` reports it (124 on a timeout). */
int pulsebox_result_exit_code(const pulsebox_result* result);
/* The status `pulsebox run` would exit with (123: the changes were not kept
 * as asked; docs/cli.md). */
int pulsebox_result_exit_status(const pulsebox_result* result);
/* The signal that ended the command, or 0. */
int pulsebox_result_signal(const pulsebox_result* result);
/* "timeout", "memory_limit", "cancelled", ... ; NULL when the command exited by itself. */
const char* pulsebox_result_termination_reason(const pulsebox_result* result);
/* Scrubbed output; *length receives its size (length may be NULL). */
const char* pulsebox_result_stdout(const pulsebox_result* result, size_t* length);
const char* pulsebox_result_stderr(const pulsebox_result* result, size_t* length);
/* The transaction holding the run's changes, or NULL. */
const char* pulsebox_result_transaction_id(const pulsebox_result* result);
/* "unchanged", "staged", "committed", "discarded", "conflict", "held", "session". */
const char* pulsebox_result_changes_status(const pulsebox_result* result);
/* The whole result as `pulsebox run --json` prints it (docs/schema/result.schema.json). */
const char* pulsebox_result_json(const pulsebox_result* result);
void pulsebox_result_free(pulsebox_result* result);

/* Transactions: the review of a run's changes, and staged writes of the
 * caller's own, through the action policy with every step audited. Strings
 * are freed with pulsebox_string_free, lists with pulsebox_string_list_free. */
/* The unified diff of a transaction; *length may be NULL. */
pulsebox_status pulsebox_diff(pulsebox_sandbox* sandbox, const char* transaction, char** diff,
                              size_t* length, pulsebox_error** error);
/* Applies it; *committed (may be NULL) receives the paths written. A
 * conflict is PULSEBOX_ERROR_CONFLICT with the paths in the error; the
 * transaction is then kept. */
pulsebox_status pulsebox_commit(pulsebox_sandbox* sandbox, const char* transaction,
                                pulsebox_string_list** committed, pulsebox_error** error);
pulsebox_status pulsebox_discard(pulsebox_sandbox* sandbox, const char* transaction,
                                 pulsebox_error** error);
/* A workspace file, through the READ policy, scrubbed of registered secrets. */
pulsebox_status pulsebox_read_file(pulsebox_sandbox* sandbox, const char* path, char** bytes,
                                   size_t* length, pulsebox_error** error);
/* An empty transaction; *transaction is freed with pulsebox_string_free. */
pulsebox_status pulsebox_create_transaction(pulsebox_sandbox* sandbox, char** transaction,
                                            pulsebox_error** error);
/* `mode` as chmod takes it (0644). */
pulsebox_status pulsebox_stage_write(pulsebox_sandbox* sandbox, const char* transaction,
                                     const char* path, const char* bytes, size_t length,
                                     unsigned mode, pulsebox_error** error);
pulsebox_status pulsebox_stage_delete(pulsebox_sandbox* sandbox, const char* transaction,
                                      const char* path, pulsebox_error** error);

#ifdef __cplusplus
}
#endif

#endif /* PULSEBOX_PULSEBOX_H */
