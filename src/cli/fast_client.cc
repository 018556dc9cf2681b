// See fast_client.h: this runs before the C library is set up. Only raw
// system calls, the stack, and byte loops the compiler must not turn into
// library calls (built with -ffreestanding -fno-builtin
// -fno-tree-loop-distribute-patterns -fno-stack-protector).
#include "cli/fast_client.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include <cerrno>
#include <cstdint>

#include "cli/exit_codes.h"
#include "core/decimal_text.h"
#include "linux/syscalls.h"
#include "server/protocol_constants.h"

// The entry point: the initial stack to pulsebox_fast_client(), and when
// that returns (the work is this process's) to pulsebox_prefault_image()
// (cli/prefault.h); then glibc's own entry with the stack pointer and %rdx
// (the dynamic linker's exit function, 0 for a static program) as the
// kernel gave them. %r12/%r13 are callee-saved, so they survive the calls.
asm(R"(
  .text
  .globl pulsebox_fast_entry
  .type pulsebox_fast_entry, @function
pulsebox_fast_entry:
  mov %rsp, %r12
  mov %rdx, %r13
  mov %rsp, %rdi
  and $-16, %rsp
  call pulsebox_fast_client
  mov %r12, %rdi
  call pulsebox_prefault_image
  mov %r12, %rsp
  mov %r13, %rdx
  xor %r12d, %r12d
  xor %r13d, %r13d
  jmp _start
  .size pulsebox_fast_entry, .-pulsebox_fast_entry
)");

int pulsebox_fast_client_verdict = kFastNotTried;  // hidden: no GOT entry to relocate

namespace {

using pulsebox::linux_api::raw;

constexpr std::size_t kBufferBytes = pulsebox::server::kMaxRequestBytes + 64 * 1024;
using pulsebox::cli::kExitUsage;

std::size_t length(const char* text) {
  std::size_t n = 0;
  while (text[n] != '\0')
    ++n;
  return n;
}

bool equal(const char* a, const char* b) {
  std::size_t i = 0;
  for (; a[i] != '\0' && a[i] == b[i]; ++i) {
  }
  return a[i] == b[i];
}

// The value of NAME in envp, or null.
const char* variable(char** envp, const char* name) {
  for (char** entry = envp; *entry != nullptr; ++entry) {
    std::size_t i = 0;
    for (; name[i] != '\0' && (*entry)[i] == name[i]; ++i) {
    }
    if (name[i] == '\0' && (*entry)[i] == '=') return *entry + i + 1;
  }
  return nullptr;
}

// Appends to a fixed buffer; `ok` turns false (for good) once it is full.
struct Writer {
  char* out;
  std::size_t capacity;
  std::size_t size = 0;
  bool ok = true;

  void bytes(const char* data, std::size_t n) {
    if (!ok || capacity - size < n) {
      ok = false;
      return;
    }
    for (std::size_t i = 0; i < n; ++i)
      out[size + i] = data[i];
    size += n;
  }
  void text(const char* t) { bytes(t, length(t)); }
  void u32(std::uint32_t value) {  // host byte order, as server/protocol.cc
    char raw_bytes[4];
    const auto* p = reinterpret_cast<const unsigned char*>(&value);
    for (int i = 0; i < 4; ++i)
      raw_bytes[i] = static_cast<char>(p[i]);
    bytes(raw_bytes, 4);
  }
  void string(const char* t) {
    const std::size_t n = length(t);
    u32(static_cast<std::uint32_t>(n));
    bytes(t, n);
  }
  void number(unsigned long long value) {  // decimal, as std::to_string
    char digits[pulsebox::core::kMaxDecimalChars];
    bytes(digits, static_cast<std::size_t>(pulsebox::core::write_decimal(value, digits)));
  }
};

void say(const char* first, const char* second = "", const char* third = "") {
  raw(SYS_write, 2, "pulsebox: ", 10);
  raw(SYS_write, 2, first, length(first));
  raw(SYS_write, 2, second, length(second));
  raw(SYS_write, 2, third, length(third));
  raw(SYS_write, 2, "\n", 1);
}

[[noreturn]] void exit_now(int code) {
  for (;;)
    raw(SYS_exit_group, code);
}

}  // namespace

extern "C" {

bool pulsebox_fast_binary_identity(char* out, std::size_t capacity) {
  Writer w{out, capacity};
  w.bytes(PULSEBOX_CLIENT_IDENTITY, sizeof PULSEBOX_CLIENT_IDENTITY);
  return w.ok;
}

std::size_t pulsebox_fast_encode_request(char* out, std::size_t capacity, char** argv, int first,
                                         int argc, char** envp, const char* cwd,
                                         unsigned umask_value, const char* identity) {
  Writer w{out, capacity};
  w.text("PBRQ");
  w.u32(pulsebox::server::kProtocolVersion);
  w.string(identity);
  w.u32(static_cast<std::uint32_t>(argc > first ? argc - first : 0));
  for (int i = first; i < argc; ++i)
    w.string(argv[i]);
  std::uint32_t variables = 0;
  for (char** entry = envp; *entry != nullptr; ++entry)
    ++variables;
  w.u32(variables);
  for (char** entry = envp; *entry != nullptr; ++entry)
    w.string(*entry);
  w.string(cwd);
  w.u32(umask_value);
  return w.ok ? w.size : 0;
}

void pulsebox_fast_client(long* initial_stack) {
  const int argc = static_cast<int>(initial_stack[0]);
  char** argv = reinterpret_cast<char**>(initial_stack + 1);
  char** envp = argv + argc + 1;
  if (argc < 2 || !equal(argv[1], "run")) return;
  // `pulsebox-runc run` is the OCI runtime's run (cli/main.cc), never a
  // sandbox run for the server.
  const char* program_name = argv[0];
  for (const char* c = argv[0]; *c != '\0'; ++c) {
    if (*c == '/') program_name = c + 1;
  }
  if (equal(program_name, "pulsebox-runc")) return;
  // A closed stdin: main() puts /dev/null there first (cli/main.cc).
  if (raw(SYS_fcntl, 0, F_GETFD) < 0) return;
  // Traced runs, and every case that needs a word to the user, are
  // main()'s (cli/server_client.cc).
  if (const char* trace = variable(envp, "PULSEBOX_TRACE"); trace != nullptr && equal(trace, "1"))
    return;
  const char* chosen = variable(envp, "PULSEBOX_SERVER");
  const bool explicit_socket = chosen != nullptr && chosen[0] != '\0';
  if (explicit_socket && (equal(chosen, "off") || equal(chosen, "0") || equal(chosen, "no") ||
                          equal(chosen, "none"))) {
    pulsebox_fast_client_verdict = kFastNoServer;
    return;
  }

  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  Writer path{address.sun_path, sizeof address.sun_path - 1};
  const char* state = variable(envp, "PULSEBOX_STATE_DIR");
  const long uid = raw(SYS_geteuid);
  if (explicit_socket) {
    path.text(chosen);
  } else if (state != nullptr && state[0] != '\0') {
    path.text(state);
    path.text("/server.sock");
  } else if (uid == 0) {
    path.text("/var/lib/pulsebox/server.sock");
  } else {
    path.text("/var/tmp/pulsebox-");
    path.number(static_cast<unsigned long long>(uid));
    path.text("/server.sock");
  }
  if (!path.ok) return;

  const long connection = raw(SYS_socket, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (connection < 0) return;
  if (raw(SYS_connect, connection, &address, sizeof address) != 0) {
    raw(SYS_close, connection);
    if (!explicit_socket) pulsebox_fast_client_verdict = kFastNoServer;
    return;
  }
  ucred credentials{};
  socklen_t credentials_size = sizeof credentials;
  if (raw(SYS_getsockopt, connection, SOL_SOCKET, SO_PEERCRED, &credentials, &credentials_size) !=
          0 ||
      static_cast<long>(credentials.uid) != uid) {
    raw(SYS_close, connection);
    return;  // main() says whose socket it is
  }

  const long mapped = raw(SYS_mmap, nullptr, kBufferBytes, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped < 0) {
    raw(SYS_close, connection);
    return;
  }
  char* buffer = reinterpret_cast<char*>(mapped);
  auto give_up = [&] {
    raw(SYS_munmap, buffer, kBufferBytes);
    raw(SYS_close, connection);
  };
  char identity[128];
  char cwd[4096];
  if (!pulsebox_fast_binary_identity(identity, sizeof identity)) return give_up();
  if (raw(SYS_getcwd, cwd, sizeof cwd) < 0) cwd[0] = '\0';
  const long mask = raw(SYS_umask, 0);
  raw(SYS_umask, mask);
  const std::size_t size =
      pulsebox_fast_encode_request(buffer, pulsebox::server::kMaxRequestBytes, argv, 2, argc, envp,
                                   cwd, static_cast<unsigned>(mask), identity);
  if (size == 0) return give_up();  // a huge environment: in-process
  const long here = raw(SYS_openat, AT_FDCWD, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (here < 0 || raw(SYS_fcntl, 1, F_GETFD) < 0 || raw(SYS_fcntl, 2, F_GETFD) < 0) {
    if (here >= 0) raw(SYS_close, here);
    return give_up();
  }
  iovec data{buffer, size};
  msghdr header{};
  header.msg_iov = &data;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
  for (char& byte : control)
    byte = 0;
  header.msg_control = control;
  header.msg_controllen = sizeof control;
  cmsghdr* item = CMSG_FIRSTHDR(&header);
  item->cmsg_level = SOL_SOCKET;
  item->cmsg_type = SCM_RIGHTS;
  item->cmsg_len = CMSG_LEN(4 * sizeof(int));
  const int fds[4] = {static_cast<int>(here), 1, 2, 0};
  auto* slots = reinterpret_cast<unsigned char*>(CMSG_DATA(item));
  const auto* from = reinterpret_cast<const unsigned char*>(fds);
  for (std::size_t i = 0; i < sizeof fds; ++i)
    slots[i] = from[i];
  long sent = 0;
  do {
    sent = raw(SYS_sendmsg, connection, &header, MSG_NOSIGNAL);
  } while (sent == -EINTR);
  raw(SYS_close, here);
  if (sent != static_cast<long>(size)) return give_up();

  // The server runs it; the output arrives on our own stdout and stderr.
  char reply[1024];
  iovec reply_data{reply, sizeof reply};
  msghdr reply_header{};
  reply_header.msg_iov = &reply_data;
  reply_header.msg_iovlen = 1;
  long received = 0;
  do {
    received = raw(SYS_recvmsg, connection, &reply_header, MSG_CMSG_CLOEXEC);
  } while (received == -EINTR);
  if (received <= 0) {
    say("the server at ", address.sun_path,
        " ended during the run; the command's result is unknown: see the server's stderr, and "
        "run it again (PULSEBOX_SERVER=off runs it in this process)");
    exit_now(kExitUsage);
  }
  // "PBRP", version, kind, exit status, reason (server/protocol.cc).
  auto u32_at = [&](int at) {
    std::uint32_t value = 0;
    auto* to = reinterpret_cast<unsigned char*>(&value);
    for (int i = 0; i < 4; ++i)
      to[i] = static_cast<unsigned char>(reply[at + i]);
    return value;
  };
  const bool ours = received >= 20 && reply[0] == 'P' && reply[1] == 'B' && reply[2] == 'R' &&
                    reply[3] == 'P' && u32_at(4) == pulsebox::server::kProtocolVersion;
  if (ours && u32_at(8) == static_cast<std::uint32_t>(pulsebox::server::ReplyKind::Done) &&
      received == 20 && u32_at(16) == 0) {
    exit_now(static_cast<int>(u32_at(12)));
  }
  if (ours && u32_at(8) == static_cast<std::uint32_t>(pulsebox::server::ReplyKind::Fallback)) {
    pulsebox_fast_client_verdict = kFastFallback;
    return give_up();
  }
  say("the server at ", address.sun_path,
      " gave an answer this client does not know (is it another pulsebox version? restart it, "
      "or set PULSEBOX_SERVER=off)");
  exit_now(kExitUsage);
}

}  // extern "C"
