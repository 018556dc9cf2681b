#include <stdio.h>

int main(void) {
  printf("hello from the sandbox\n");
  return 0;
}
