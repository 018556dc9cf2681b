/* Built by tools/check with `cc -std=c11` against the *installed*
 * pulsebox.h and libpulsebox.so (through pkg-config): runs a sandboxed
 * command in the workspace given, reads the result, commits the changes.
 * docs/embedding.md shows this program. */
#include <pulsebox/pulsebox.h>
#include <stdio.h>

int main(int argc, char** argv) {
  const char* workspace = argc > 1 ? argv[1] : ".";
  const char* command[] = {"sh", "-c", "echo built > out.txt", NULL};
  pulsebox_sandbox* sandbox = NULL;
  pulsebox_result* result = NULL;
  pulsebox_error* error = NULL;
  if (pulsebox_sandbox_new(workspace, NULL, &sandbox, &error) == PULSEBOX_OK &&
      pulsebox_sandbox_run(sandbox, command, NULL, &result, &error) == PULSEBOX_OK) {
    const char* tx = pulsebox_result_transaction_id(result); /* NULL: nothing changed */
    printf("exit %d, changes %s\n", pulsebox_result_exit_code(result), tx ? tx : "none");
    if (tx != NULL) pulsebox_commit(sandbox, tx, NULL, &error);
  }
  if (error != NULL) {
    fprintf(stderr, "pulsebox: %s: %s\n", pulsebox_status_name(pulsebox_error_code(error)),
            pulsebox_error_message(error));
  }
  const int failed = error != NULL;
  pulsebox_error_free(error);
  pulsebox_result_free(result);
  pulsebox_sandbox_free(sandbox);
  return failed;
}
