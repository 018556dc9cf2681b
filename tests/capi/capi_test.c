/* The C ABI (include/pulsebox/pulsebox.h) from C11, linked with
 * libpulsebox.so: real sandboxed runs in a temporary workspace. Prints TAP;
 * with --gtest_output=xml:FILE (tools/check's ordinary-user pass) also
 * writes a JUnit report there. Exits non-zero on any failure. */
#define _GNU_SOURCE
#include <pulsebox/pulsebox.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { kMaxCases = 32 };
static const char* case_names[kMaxCases];
static char case_failures[kMaxCases][512];
static int case_count = 0;
static int current = -1;
static char root[256];

#define CHECK(condition, ...)                                                                     \
  do {                                                                                            \
    if (!(condition)) {                                                                           \
      snprintf(case_failures[current], sizeof case_failures[current], "line %d: %s: ", __LINE__,  \
               #condition);                                                                       \
      size_t used = strlen(case_failures[current]);                                               \
      snprintf(case_failures[current] + used, sizeof case_failures[current] - used, __VA_ARGS__); \
      return;                                                                                     \
    }                                                                                             \
  } while (0)

static const char* message_of(const pulsebox_error* error) {
  return error == NULL ? "(no error)" : pulsebox_error_message(error);
}

static int write_text(const char* path, const char* text) {
  FILE* file = fopen(path, "w");
  if (file == NULL) return 0;
  const int ok = fputs(text, file) >= 0;
  return fclose(file) == 0 && ok;
}

static int file_holds(const char* path, const char* text) {
  char buffer[256] = {0};
  FILE* file = fopen(path, "r");
  if (file == NULL) return 0;
  const size_t n = fread(buffer, 1, sizeof buffer - 1, file);
  fclose(file);
  return n == strlen(text) && memcmp(buffer, text, n) == 0;
}

/* A fresh workspace under the test's root. */
static const char* workspace(const char* name) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", root, name);
  return mkdir(path, 0700) == 0 ? path : NULL;
}

/* Limits may be weaker for an ordinary user without cgroups. */
#define WEAKER "\"allow_weaker\": [\"limits\"]"

struct output {
  char text[4096];
  size_t length;
};

static void collect(void* user_data, pulsebox_stream stream, const char* bytes, size_t length) {
  struct output* out = user_data;
  if (stream != PULSEBOX_STDOUT) return;
  if (length > sizeof out->text - 1 - out->length) length = sizeof out->text - 1 - out->length;
  memcpy(out->text + out->length, bytes, length);
  out->length += length;
}

struct approvals {
  int answer;
  int asked;
  char request[1024];
};

static int approve(void* user_data, const char* request_json) {
  struct approvals* approvals = user_data;
  ++approvals->asked;
  snprintf(approvals->request, sizeof approvals->request, "%s", request_json);
  return approvals->answer;
}

static void test_version(void) {
  CHECK(pulsebox_abi_version() == PULSEBOX_ABI_VERSION, "abi %d", pulsebox_abi_version());
  CHECK(strlen(pulsebox_version()) > 0, "empty version");
  CHECK(strcmp(pulsebox_status_name(PULSEBOX_ERROR_INVALID_FIELD), "invalid_field") == 0, "%s",
        pulsebox_status_name(PULSEBOX_ERROR_INVALID_FIELD));
}

static void test_null_arguments_are_errors(void) {
  pulsebox_sandbox* sandbox = NULL;
  pulsebox_error* error = NULL;
  pulsebox_status status = pulsebox_sandbox_new(NULL, NULL, &sandbox, &error);
  CHECK(status == PULSEBOX_ERROR_INVALID_REQUEST, "status %d", status);
  CHECK(sandbox == NULL && error != NULL, "no error object");
  CHECK(
      pulsebox_error_field(error) != NULL && strcmp(pulsebox_error_field(error), "workspace") == 0,
      "field %s", pulsebox_error_field(error));
  pulsebox_error_free(error);
  pulsebox_result* result = NULL;
  const char* argv[] = {"true", NULL};
  status = pulsebox_sandbox_run(NULL, argv, NULL, &result, &error);
  CHECK(status == PULSEBOX_ERROR_INVALID_REQUEST && result == NULL, "status %d", status);
  pulsebox_error_free(error);
  /* No error object wanted: the status alone. */
  CHECK(pulsebox_diff(NULL, NULL, NULL, NULL, NULL) == PULSEBOX_ERROR_INVALID_REQUEST, "diff");
  CHECK(pulsebox_error_message(NULL)[0] == '\0' && pulsebox_result_json(NULL)[0] == '\0', "NULL");
  pulsebox_sandbox_free(NULL);
  pulsebox_result_free(NULL);
}

static void test_bad_options_name_the_field(void) {
  const char* ws = workspace("bad-options");
  CHECK(ws != NULL, "workspace");
  static const struct {
    const char* options;
    pulsebox_status status;
    const char* field;
  } cases[] = {
      {"{\"limits\": {\"memory\": \"12x\"}}", PULSEBOX_ERROR_INVALID_FIELD, "limits.memory"},
      {"{\"limits\": {\"memroy\": \"1G\"}}", PULSEBOX_ERROR_INVALID_FIELD, "limits.memroy"},
      {"{\"colour\": true}", PULSEBOX_ERROR_INVALID_FIELD, "colour"},
      {"{\"argv\": [\"sh\"]}", PULSEBOX_ERROR_INVALID_FIELD, "argv"},
      {"{\"changes\": \"maybe\"}", PULSEBOX_ERROR_INVALID_FIELD, "changes"},
      {"{\"limits\": ", PULSEBOX_ERROR_INVALID_REQUEST, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    pulsebox_sandbox* sandbox = NULL;
    pulsebox_error* error = NULL;
    const pulsebox_status status = pulsebox_sandbox_new(ws, cases[i].options, &sandbox, &error);
    const char* field = pulsebox_error_field(error);
    const int ok = status == cases[i].status && sandbox == NULL &&
                   (cases[i].field == NULL ? field == NULL
                                           : field != NULL && strcmp(field, cases[i].field) == 0);
    char message[300];
    snprintf(message, sizeof message, "field %s, message %s", field == NULL ? "NULL" : field,
             message_of(error));
    pulsebox_error_free(error);
    pulsebox_sandbox_free(sandbox);
    CHECK(ok, "%s: status %d, %s", cases[i].options, status, message);
  }
}

static void test_run_diff_commit(void) {
  const char* ws = workspace("run");
  CHECK(ws != NULL, "workspace");
  char ws_path[512];
  snprintf(ws_path, sizeof ws_path, "%s", ws);
  pulsebox_sandbox* sandbox = NULL;
  pulsebox_error* error = NULL;
  pulsebox_status status = pulsebox_sandbox_new(
      ws_path, "{\"secrets\": {\"CAPI_TOKEN\": \"capi-secret-7f3a9\"}, " WEAKER "}", &sandbox,
      &error);
  CHECK(status == PULSEBOX_OK, "new: %s", message_of(error));
  struct output out = {{0}, 0};
  pulsebox_run_options options;
  pulsebox_run_options_init(&options);
  options.on_output = collect;
  options.user_data = &out;
  options.stdin_data = "from stdin";
  options.stdin_length = strlen("from stdin");
  const char* argv[] = {"sh", "-c",
                        "echo \"token=$CAPI_TOKEN\"; read line; echo \"$line\"; "
                        "echo hello > out.txt",
                        NULL};
  pulsebox_result* result = NULL;
  status = pulsebox_sandbox_run(sandbox, argv, &options, &result, &error);
  if (status != PULSEBOX_OK) pulsebox_sandbox_free(sandbox);
  CHECK(status == PULSEBOX_OK, "run: %s", message_of(error));
  size_t length = 0;
  const char* stdout_text = pulsebox_result_stdout(result, &length);
  const char* tx = pulsebox_result_transaction_id(result);
  char transaction[128] = {0};
  if (tx != NULL) snprintf(transaction, sizeof transaction, "%s", tx);
  const int exit_code = pulsebox_result_exit_code(result);
  const int scrubbed = strstr(out.text, "capi-secret-7f3a9") == NULL &&
                       strstr(out.text, "token=[REDACTED") != NULL &&
                       strstr(stdout_text, "capi-secret-7f3a9") == NULL;
  const int stdin_seen = strstr(stdout_text, "from stdin") != NULL && length == strlen(stdout_text);
  const int staged = strcmp(pulsebox_result_changes_status(result), "staged") == 0 &&
                     strstr(pulsebox_result_json(result), transaction) != NULL &&
                     pulsebox_result_termination_reason(result) == NULL &&
                     strstr(pulsebox_result_json(result), "\"isolation_level\":\"native\"");
  pulsebox_result_free(result);
  if (!(exit_code == 0 && scrubbed && stdin_seen && staged && tx != NULL)) {
    pulsebox_sandbox_free(sandbox);
  }
  CHECK(exit_code == 0, "exit %d", exit_code);
  CHECK(scrubbed, "output not scrubbed: %s", out.text);
  CHECK(stdin_seen, "stdout %s", stdout_text);
  CHECK(staged && transaction[0] != '\0', "no staged transaction");

  char* diff = NULL;
  status = pulsebox_diff(sandbox, transaction, &diff, &length, &error);
  const int diff_ok = status == PULSEBOX_OK && strstr(diff, "out.txt") != NULL &&
                      strstr(diff, "+hello") != NULL && length == strlen(diff);
  pulsebox_string_free(diff);
  pulsebox_string_list* committed = NULL;
  if (diff_ok) status = pulsebox_commit(sandbox, transaction, &committed, &error);
  pulsebox_sandbox_free(sandbox);
  CHECK(diff_ok, "diff: %s", message_of(error));
  const int listed = pulsebox_string_list_count(committed) == 1 &&
                     strcmp(pulsebox_string_list_get(committed, 0), "out.txt") == 0;
  pulsebox_string_list_free(committed);
  CHECK(status == PULSEBOX_OK && listed, "commit: %s", message_of(error));
  char file[600];
  snprintf(file, sizeof file, "%s/out.txt", ws_path);
  CHECK(file_holds(file, "hello\n"), "out.txt did not land");
}

/* A run under a policy whose SHELL rule says `decision`; `answer` for on_approval. */
static pulsebox_status run_under(const char* name, const char* decision,
                                 struct approvals* approvals, char* message, size_t size) {
  const char* ws = workspace(name);
  if (ws == NULL) return PULSEBOX_ERROR_INTERNAL;
  char options_json[512];
  snprintf(options_json, sizeof options_json,
           "{\"policy\": {\"rules\": [{\"action\": \"shell\", \"target\": \"*\", "
           "\"decision\": \"%s\"}]}, " WEAKER "}",
           decision);
  pulsebox_sandbox* sandbox = NULL;
  pulsebox_error* error = NULL;
  pulsebox_status status = pulsebox_sandbox_new(ws, options_json, &sandbox, &error);
  if (status == PULSEBOX_OK) {
    pulsebox_run_options options;
    pulsebox_run_options_init(&options);
    if (approvals != NULL) {
      options.on_approval = approve;
      options.user_data = approvals;
    }
    const char* argv[] = {"true", NULL};
    pulsebox_result* result = NULL;
    status = pulsebox_sandbox_run(sandbox, argv, &options, &result, &error);
    if (status == PULSEBOX_OK && pulsebox_result_exit_code(result) != 0) {
      status = PULSEBOX_ERROR_INTERNAL;
    }
    pulsebox_result_free(result);
  }
  snprintf(message, size, "%s", message_of(error));
  pulsebox_error_free(error);
  pulsebox_sandbox_free(sandbox);
  return status;
}

static void test_ask_approved_by_callback(void) {
  struct approvals approvals = {1, 0, {0}};
  char message[512];
  const pulsebox_status status = run_under("ask-yes", "ask", &approvals, message, sizeof message);
  CHECK(status == PULSEBOX_OK, "%d: %s", status, message);
  CHECK(approvals.asked == 1, "asked %d times", approvals.asked);
  CHECK(strstr(approvals.request, "\"action\"") != NULL &&
            strstr(approvals.request, "\"shell\"") != NULL,
        "request %s", approvals.request);
}

static void test_ask_denied_by_callback(void) {
  struct approvals approvals = {0, 0, {0}};
  char message[512];
  const pulsebox_status status = run_under("ask-no", "ask", &approvals, message, sizeof message);
  CHECK(status == PULSEBOX_ERROR_POLICY_DENIED, "%d: %s", status, message);
  CHECK(approvals.asked == 1, "asked %d times", approvals.asked);
}

static void test_ask_without_callback_is_denied(void) {
  char message[512];
  const pulsebox_status status = run_under("ask-none", "ask", NULL, message, sizeof message);
  CHECK(status == PULSEBOX_ERROR_POLICY_DENIED, "%d: %s", status, message);
}

static void test_policy_deny(void) {
  struct approvals approvals = {1, 0, {0}};
  char message[512];
  const pulsebox_status status = run_under("deny", "deny", &approvals, message, sizeof message);
  CHECK(status == PULSEBOX_ERROR_POLICY_DENIED, "%d: %s", status, message);
  CHECK(approvals.asked == 0, "a DENY was put to the callback");
}

static void test_commit_conflict_names_the_path(void) {
  const char* ws = workspace("conflict");
  CHECK(ws != NULL, "workspace");
  char ws_path[512], file[600];
  snprintf(ws_path, sizeof ws_path, "%s", ws);
  snprintf(file, sizeof file, "%s/c.txt", ws_path);
  CHECK(write_text(file, "base\n"), "c.txt");
  pulsebox_sandbox* sandbox = NULL;
  pulsebox_error* error = NULL;
  pulsebox_status status = pulsebox_sandbox_new(ws_path, "{" WEAKER "}", &sandbox, &error);
  CHECK(status == PULSEBOX_OK, "new: %s", message_of(error));
  const char* argv[] = {"sh", "-c", "echo sandbox > c.txt", NULL};
  pulsebox_result* result = NULL;
  status = pulsebox_sandbox_run(sandbox, argv, NULL, &result, &error);
  char transaction[128] = {0};
  if (status == PULSEBOX_OK && pulsebox_result_transaction_id(result) != NULL) {
    snprintf(transaction, sizeof transaction, "%s", pulsebox_result_transaction_id(result));
  }
  pulsebox_result_free(result);
  if (transaction[0] != '\0' && write_text(file, "changed on the host\n")) {
    status = pulsebox_commit(sandbox, transaction, NULL, &error);
  }
  pulsebox_sandbox_free(sandbox);
  CHECK(transaction[0] != '\0', "run: %s", message_of(error));
  const int named =
      pulsebox_error_path_count(error) == 1 && strcmp(pulsebox_error_path(error, 0), "c.txt") == 0;
  char message[512];
  snprintf(message, sizeof message, "%s", message_of(error));
  pulsebox_error_free(error);
  CHECK(status == PULSEBOX_ERROR_CONFLICT, "status %d: %s", status, message);
  CHECK(named, "paths not named: %s", message);
  CHECK(file_holds(file, "changed on the host\n"), "the host's change was overwritten");
}

static void test_transactions_of_the_caller(void) {
  const char* ws = workspace("staged");
  CHECK(ws != NULL, "workspace");
  pulsebox_sandbox* sandbox = NULL;
  pulsebox_error* error = NULL;
  /* The defaults deny staged writes (WRITE), as the reference's do. */
  pulsebox_status status = pulsebox_sandbox_new(
      ws,
      "{\"policy\": {\"rules\": [{\"action\": \"write\", \"target\": \"staged.txt\", "
      "\"decision\": \"allow\"}, {\"action\": \"read\", \"target\": \"*\", "
      "\"decision\": \"allow\"}]}}",
      &sandbox, &error);
  CHECK(status == PULSEBOX_OK, "new: %s", message_of(error));
  char* tx = NULL;
  char* bytes = NULL;
  size_t length = 0;
  status = pulsebox_diff(sandbox, "tx-nope", &bytes, NULL, &error);
  const int not_found = status == PULSEBOX_ERROR_NOT_FOUND && bytes == NULL;
  pulsebox_error_free(error);
  error = NULL;
  status = pulsebox_create_transaction(sandbox, &tx, &error);
  if (status == PULSEBOX_OK) {
    status = pulsebox_stage_write(sandbox, tx, "staged.txt", "a\0b", 3, 0644, &error);
  }
  if (status == PULSEBOX_OK) status = pulsebox_commit(sandbox, tx, NULL, &error);
  if (status == PULSEBOX_OK) {
    status = pulsebox_read_file(sandbox, "staged.txt", &bytes, &length, &error);
  }
  const int read_back = status == PULSEBOX_OK && length == 3 && memcmp(bytes, "a\0b", 3) == 0;
  char message[512];
  snprintf(message, sizeof message, "%s", message_of(error));
  pulsebox_error_free(error);
  pulsebox_string_free(bytes);
  pulsebox_string_free(tx);
  pulsebox_sandbox_free(sandbox);
  CHECK(not_found, "an unknown transaction: status %d", status);
  CHECK(read_back, "status %d: %s", status, message);
}

static void test_cancel_fd_cancels_the_run(void) {
  const char* ws = workspace("cancel");
  CHECK(ws != NULL, "workspace");
  pulsebox_sandbox* sandbox = NULL;
  pulsebox_error* error = NULL;
  pulsebox_status status = pulsebox_sandbox_new(ws, "{" WEAKER "}", &sandbox, &error);
  CHECK(status == PULSEBOX_OK, "new: %s", message_of(error));
  int cancel[2];
  CHECK(pipe(cancel) == 0, "pipe");
  /* Readable before the run starts: cancelled at once. */
  CHECK(write(cancel[1], "x", 1) == 1, "write");
  pulsebox_run_options options;
  pulsebox_run_options_init(&options);
  options.cancel_fd = cancel[0];
  const char* argv[] = {"sleep", "5", NULL};
  pulsebox_result* result = NULL;
  status = pulsebox_sandbox_run(sandbox, argv, &options, &result, &error);
  const char* reason = pulsebox_result_termination_reason(result);
  const int cancelled = status == PULSEBOX_OK && reason != NULL && strcmp(reason, "cancelled") == 0;
  char message[300];
  snprintf(message, sizeof message, "status %d, reason %s: %s", status,
           reason == NULL ? "NULL" : reason, message_of(error));
  pulsebox_result_free(result);
  pulsebox_error_free(error);
  pulsebox_sandbox_free(sandbox);
  close(cancel[0]);
  close(cancel[1]);
  CHECK(cancelled, "%s", message);
}

static void run_case(const char* name, void (*test)(void)) {
  current = case_count++;
  case_names[current] = name;
  case_failures[current][0] = '\0';
  test();
  if (case_failures[current][0] == '\0') {
    printf("ok %d - %s\n", current + 1, name);
  } else {
    printf("not ok %d - %s\n# %s\n", current + 1, name, case_failures[current]);
  }
  fflush(stdout);
}

static void write_xml_text(FILE* out, const char* text) {
  for (; *text != '\0'; ++text) {
    switch (*text) {
      case '<':
        fputs("&lt;", out);
        break;
      case '>':
        fputs("&gt;", out);
        break;
      case '&':
        fputs("&amp;", out);
        break;
      case '"':
        fputs("&quot;", out);
        break;
      default:
        if ((unsigned char)*text >= 0x20 || *text == '\n') fputc(*text, out);
    }
  }
}

static int write_junit(const char* path, int failures) {
  FILE* out = fopen(path, "w");
  if (out == NULL) return 0;
  fprintf(out,
          "<?xml version=\"1.0\"?>\n<testsuites tests=\"%d\" failures=\"%d\">\n"
          "<testsuite name=\"capi\" tests=\"%d\" failures=\"%d\">\n",
          case_count, failures, case_count, failures);
  for (int i = 0; i < case_count; ++i) {
    fprintf(out, "<testcase classname=\"capi\" name=\"%s\"", case_names[i]);
    if (case_failures[i][0] == '\0') {
      fputs("/>\n", out);
      continue;
    }
    fputs("><failure message=\"", out);
    write_xml_text(out, case_failures[i]);
    fputs("\"/></testcase>\n", out);
  }
  fputs("</testsuite>\n</testsuites>\n", out);
  return fclose(out) == 0;
}

int main(int argc, char** argv) {
  const char* junit = NULL;
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--gtest_output=xml:", 19) == 0) junit = argv[i] + 19;
  }
  const char* tmp = getenv("TMPDIR");
  snprintf(root, sizeof root, "%s/pulsebox-capi-XXXXXX", tmp != NULL ? tmp : "/tmp");
  /* Searchable by others: the sandbox's unprivileged ids mount from the state directory. */
  if (mkdtemp(root) == NULL || chmod(root, 0711) != 0) {
    perror(root);
    return 1;
  }
  /* pulsebox's state and the user's config file: the test's own. */
  char dir[300];
  snprintf(dir, sizeof dir, "%s/state", root);
  if (mkdir(dir, 0700) != 0 || setenv("PULSEBOX_STATE_DIR", dir, 1) != 0) return 1;
  snprintf(dir, sizeof dir, "%s/config", root);
  if (mkdir(dir, 0700) != 0 || setenv("XDG_CONFIG_HOME", dir, 1) != 0) return 1;

  run_case("version", test_version);
  run_case("null_arguments_are_errors", test_null_arguments_are_errors);
  run_case("bad_options_name_the_field", test_bad_options_name_the_field);
  run_case("run_diff_commit", test_run_diff_commit);
  run_case("ask_approved_by_callback", test_ask_approved_by_callback);
  run_case("ask_denied_by_callback", test_ask_denied_by_callback);
  run_case("ask_without_callback_is_denied", test_ask_without_callback_is_denied);
  run_case("policy_deny", test_policy_deny);
  run_case("commit_conflict_names_the_path", test_commit_conflict_names_the_path);
  run_case("transactions_of_the_caller", test_transactions_of_the_caller);
  run_case("cancel_fd_cancels_the_run", test_cancel_fd_cancels_the_run);
  printf("1..%d\n", case_count);

  int failures = 0;
  for (int i = 0; i < case_count; ++i)
    failures += case_failures[i][0] != '\0';
  if (junit != NULL && !write_junit(junit, failures)) {
    perror(junit);
    return 1;
  }
  /* An ordinary user's overlay leaves a work directory of mode 000 in the state's trash. */
  char command[700];
  snprintf(command, sizeof command, "chmod -R u+rwX '%s' && rm -rf '%s'", root, root);
  if (failures == 0 && system(command) != 0) fprintf(stderr, "could not remove %s\n", root);
  return failures == 0 ? 0 : 1;
}
