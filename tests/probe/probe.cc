// The probe: a small static program run inside sandboxes by the integration
// tests. It reports what it sees as "key=value" lines on stdout, one
// subcommand per aspect. It depends on nothing inside the sandbox.
//
//   probe report HOST_PATH...   identity, capabilities, mounts, files, network
//   probe daemon MARKER         double-fork a sleeper (setsid) and return
//   probe sleep MARKER SECONDS  sleep (the daemon's body; MARKER names it in ps)
//   probe forks N               try to start N sleeping children; report how many
//   probe loopback              a TCP round trip over 127.0.0.1
//   probe write PATH TEXT       write a file; report the errno
//   probe syscalls              try each call a seccomp profile should deny
//                               (harmless arguments); "syscall NAME=ERRNO"
//   probe int80                 a 32-bit system call through int 0x80
//   probe hog MIB               allocate and touch MIB MiB, 1 MiB at a time
//   probe spin SECONDS          busy-loop for SECONDS of wall time; report
//                               cpu_ms and wall_ms
//   probe forkbomb              every process forks (at most 64 times each)
//                               until fork fails; the first reports the errno
//   probe socket-family FAMILY [VSOCK_PORT]
//                               socket() and socketpair() of address family
//                               FAMILY (a number), also with bits above the
//                               int set (the kernel drops them, a filter must
//                               not); with VSOCK_PORT, bind the AF_VSOCK
//                               socket to VMADDR_CID_ANY:VSOCK_PORT and close
//                               it at once (never connects, never sends)
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

void put(const std::string& key, const std::string& value) {
  std::printf("%s=%s\n", key.c_str(), value.c_str());
}

std::string errno_name(int error_number) {
  const char* name = strerrorname_np(error_number);
  return name != nullptr ? name : std::to_string(error_number);
}

std::string slurp(const char* path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// "ok" or the errno name of opening `path` with `flags`.
std::string try_open(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd < 0) return errno_name(errno);
  ::close(fd);
  return "ok";
}

std::string filesystem_at(const std::string& mount_point) {
  // mountinfo: id parent major:minor root mount-point options ... - fstype source
  std::istringstream lines(slurp("/proc/self/mountinfo"));
  std::string line, found = "none";
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string id, parent, device, root, point;
    fields >> id >> parent >> device >> root >> point;
    if (point != mount_point) continue;
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream rest(line.substr(dash + 3));
    rest >> found;  // the last mount at this point wins
  }
  return found;
}

int report(int argc, char** argv) {
  put("pid", std::to_string(::getpid()));
  put("ppid", std::to_string(::getppid()));
  put("uid", std::to_string(::getuid()));
  put("gid", std::to_string(::getgid()));
  put("euid", std::to_string(::geteuid()));
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  put("hostname", host);
  std::istringstream status(slurp("/proc/self/status"));
  std::string line;
  while (std::getline(status, line)) {
    for (const char* key : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"}) {
      const std::string prefix = std::string(key) + ":";
      if (line.rfind(prefix, 0) == 0) {
        std::string value = line.substr(prefix.size());
        value.erase(0, value.find_first_not_of(" \t"));
        put(key, value);
      }
    }
  }
  {
    // Every mount point, space-separated.
    std::istringstream lines(slurp("/proc/self/mountinfo"));
    std::string mountinfo_line, points;
    while (std::getline(lines, mountinfo_line)) {
      std::istringstream fields(mountinfo_line);
      std::string id, parent, device, root, point, options;
      fields >> id >> parent >> device >> root >> point >> options;
      points += (points.empty() ? "" : " ") + point;
      put("mount_options " + point, options);
    }
    put("mount_points", points);
  }
  put("root_fs", filesystem_at("/"));
  put("workspace_fs", filesystem_at("/workspace"));
  put("tmp_fs", filesystem_at("/tmp"));
  put("proc_fs", filesystem_at("/proc"));
  // Secrets and host files.
  {
    const int fd = ::open("/etc/shadow", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      put("shadow", errno_name(errno));
    } else {
      char buffer[64];
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      put("shadow", "read " + std::to_string(n));
      ::close(fd);
    }
  }
  put("etc_passwd_readable", try_open("/etc/passwd", O_RDONLY));
  for (int i = 2; i < argc; ++i) {
    put("host_path " + std::string(argv[i]),
        ::access(argv[i], F_OK) == 0 ? "visible" : errno_name(errno));
  }
  put("write_usr", try_open("/usr/probe-write", O_WRONLY | O_CREAT));
  put("write_etc", try_open("/etc/probe-write", O_WRONLY | O_CREAT));
  put("write_root", try_open("/probe-write", O_WRONLY | O_CREAT));
  put("write_tmp", try_open("/tmp/probe-write", O_WRONLY | O_CREAT));
  {
    const int fd =
        ::open("/workspace/probe-new.txt", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      put("write_workspace", errno_name(errno));
    } else {
      const char text[] = "written by the probe\n";
      put("write_workspace",
          ::write(fd, text, sizeof text - 1) == sizeof text - 1 ? "ok" : errno_name(errno));
      ::close(fd);
    }
  }
  put("proc_sys_write", try_open("/proc/sys/kernel/hostname", O_WRONLY));
  put("kcore", try_open("/proc/kcore", O_RDONLY));
  {
    int entries = 0;
    std::string agent = "absent";
    struct stat st {};
    if (::stat("/workspace/.agent", &st) == 0) {
      agent = "empty";
      if (auto* dir = ::opendir("/workspace/.agent")) {
        while (auto* entry = ::readdir(dir)) {
          if (std::string(entry->d_name) != "." && std::string(entry->d_name) != "..") ++entries;
        }
        ::closedir(dir);
      }
      if (entries > 0) agent = std::to_string(entries) + " entries";
    }
    put("agent_dir", agent);
  }
  // Network interfaces, from /proc/net/dev.
  std::istringstream dev(slurp("/proc/net/dev"));
  std::string interfaces;
  int skipped = 0;
  while (std::getline(dev, line)) {
    if (skipped++ < 2) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    interfaces += (interfaces.empty() ? "" : ",") + name;
  }
  put("interfaces", interfaces);
  {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq request{};
    std::strcpy(request.ifr_name, "lo");
    const bool up =
        fd >= 0 && ::ioctl(fd, SIOCGIFFLAGS, &request) == 0 && (request.ifr_flags & IFF_UP);
    put("lo_up", up ? "1" : "0");
    if (fd >= 0) ::close(fd);
  }
  // Open descriptors beyond stdio.
  int extra_fds = 0;
  for (int fd = 3; fd < 1024; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0) ++extra_fds;
  }
  put("extra_fds", std::to_string(extra_fds));
  put("sid_is_self", ::getsid(0) == ::getpid() ? "1" : "0");
  return 0;
}

int daemonize(const char* marker) {
  const pid_t first = ::fork();
  if (first < 0) return 1;
  if (first == 0) {
    ::setsid();
    const pid_t second = ::fork();
    if (second == 0) {
      const char* args[] = {"probe", "sleep", marker, "120", nullptr};
      ::execv("/proc/self/exe", const_cast<char**>(args));
      ::_exit(127);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(first, &status, 0);
  put("daemon", "started");
  return 0;
}

int forks(int count) {
  std::vector<pid_t> children;
  int failed_errno = 0;
  for (int i = 0; i < count; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::pause();
      ::_exit(0);
    }
    if (pid < 0) {
      failed_errno = errno;
      break;
    }
    children.push_back(pid);
  }
  put("forked", std::to_string(children.size()));
  put("fork_error", failed_errno ? errno_name(failed_errno) : "none");
  for (pid_t pid : children)
    ::kill(pid, SIGKILL);  // our own children only
  for (pid_t pid : children)
    ::waitpid(pid, nullptr, 0);
  return 0;
}

// Each call with arguments that do no harm if the filter lets it through;
// the filter decides before the kernel looks at them.
int syscalls() {
  struct Attempt {
    const char* name;
    long (*call)();
  };
  static const Attempt attempts[] = {
      {"mount", [] { return ::syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, nullptr); }},
      {"umount2", [] { return ::syscall(SYS_umount2, "/tmp", 0); }},
      {"pivot_root", [] { return ::syscall(SYS_pivot_root, "/tmp", "/tmp"); }},
      {"chroot", [] { return ::syscall(SYS_chroot, "/tmp"); }},
      {"ptrace", [] { return ::syscall(SYS_ptrace, 16 /*PTRACE_ATTACH*/, 1, 0, 0); }},
      {"process_vm_readv",
       [] { return ::syscall(SYS_process_vm_readv, 1, nullptr, 0, nullptr, 0, 0); }},
      {"process_vm_writev",
       [] { return ::syscall(SYS_process_vm_writev, 1, nullptr, 0, nullptr, 0, 0); }},
      {"kexec_load", [] { return ::syscall(SYS_kexec_load, 0, 0, nullptr, 0); }},
      {"kexec_file_load", [] { return ::syscall(SYS_kexec_file_load, -1, -1, 0, nullptr, 0); }},
      {"bpf", [] { return ::syscall(SYS_bpf, 0, nullptr, 0); }},
      {"perf_event_open", [] { return ::syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0); }},
      {"userfaultfd", [] { return ::syscall(SYS_userfaultfd, 0); }},
      {"keyctl", [] { return ::syscall(SYS_keyctl, 0, 0, 0, 0, 0); }},
      {"add_key", [] { return ::syscall(SYS_add_key, "user", "x", nullptr, 0, 0); }},
      {"request_key", [] { return ::syscall(SYS_request_key, "user", "x", nullptr, 0); }},
      {"io_uring_setup", [] { return ::syscall(SYS_io_uring_setup, 1, nullptr); }},
      {"io_uring_enter", [] { return ::syscall(SYS_io_uring_enter, -1, 0, 0, 0, nullptr, 0); }},
      {"io_uring_register", [] { return ::syscall(SYS_io_uring_register, -1, 0, nullptr, 0); }},
      {"open_by_handle_at", [] { return ::syscall(SYS_open_by_handle_at, -1, nullptr, 0); }},
      {"name_to_handle_at",
       [] { return ::syscall(SYS_name_to_handle_at, -1, "", nullptr, nullptr, 0); }},
      {"init_module", [] { return ::syscall(SYS_init_module, nullptr, 0, ""); }},
      {"finit_module", [] { return ::syscall(SYS_finit_module, -1, "", 0); }},
      {"delete_module", [] { return ::syscall(SYS_delete_module, "pulsebox-none", 0); }},
      {"swapon", [] { return ::syscall(SYS_swapon, "/nonexistent", 0); }},
      {"swapoff", [] { return ::syscall(SYS_swapoff, "/nonexistent"); }},
      {"reboot", [] { return ::syscall(SYS_reboot, 0, 0, 0, nullptr); }},  // bad magic
      {"setns", [] { return ::syscall(SYS_setns, -1, 0); }},
      {"unshare", [] { return ::syscall(SYS_unshare, 0x10000000 /*CLONE_NEWUSER*/); }},
      {"clone(CLONE_NEWUSER)",
       [] {
         const long pid =
             ::syscall(SYS_clone, 0x10000000 | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
         if (pid == 0) ::_exit(0);
         if (pid > 0) ::waitpid(static_cast<pid_t>(pid), nullptr, 0);
         return pid;
       }},
      {"clone3", [] { return ::syscall(SYS_clone3, nullptr, 0); }},
      {"ioctl(TIOCSTI)",
       [] {
         char c = 'x';
         return ::syscall(SYS_ioctl, 0, 0x5412 /*TIOCSTI*/, &c);
       }},
      {"personality(READ_IMPLIES_EXEC)", [] { return ::syscall(SYS_personality, 0x0400000); }},
      {"acct", [] { return ::syscall(SYS_acct, nullptr); }},
      {"settimeofday", [] { return ::syscall(SYS_settimeofday, nullptr, nullptr); }},
      {"clock_settime", [] { return ::syscall(SYS_clock_settime, 0, nullptr); }},
      {"iopl", [] { return ::syscall(SYS_iopl, 0); }},
      {"ioperm", [] { return ::syscall(SYS_ioperm, 0, 0, 0); }},
      {"modify_ldt", [] { return ::syscall(SYS_modify_ldt, 0, nullptr, 0); }},
      {"syslog",
       [] { return ::syscall(SYS_syslog, 10 /*SYSLOG_ACTION_SIZE_BUFFER*/, nullptr, 0); }},
      {"sethostname", [] { return ::syscall(SYS_sethostname, "x", 1); }},
      {"kcmp", [] { return ::syscall(SYS_kcmp, 1, 1, 0, 0, 0); }},
      {"pidfd_getfd", [] { return ::syscall(SYS_pidfd_getfd, -1, 0, 0); }},
      {"open_tree", [] { return ::syscall(SYS_open_tree, -1, "", 0); }},
      {"move_mount", [] { return ::syscall(SYS_move_mount, -1, "", -1, "", 0); }},
      {"fsopen", [] { return ::syscall(SYS_fsopen, "tmpfs", 0); }},
      {"mount_setattr", [] { return ::syscall(SYS_mount_setattr, -1, "", 0, nullptr, 0); }},
  };
  for (const auto& attempt : attempts) {
    errno = 0;
    const long rc = attempt.call();
    put(std::string("syscall ") + attempt.name, rc < 0 ? errno_name(errno) : "allowed");
  }
  return 0;
}

// getpid through the 32-bit entry point (eax = 20 there).
int int80() {
  long rc = 20;
  asm volatile("int $0x80" : "+a"(rc) : : "memory");
  put("int80", std::to_string(rc));
  return 0;
}

int loopback() {
  const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (server < 0 || ::bind(server, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(server, 1) != 0 ||
      ::getsockname(server, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    put("loopback", errno_name(errno));
    return 0;
  }
  const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    put("loopback", errno_name(errno));
    return 0;
  }
  const int accepted = ::accept(server, nullptr, nullptr);
  char byte = 'x';
  const bool ok = ::write(client, &byte, 1) == 1 && ::read(accepted, &byte, 1) == 1 && byte == 'x';
  put("loopback", ok ? "ok" : errno_name(errno));
  return 0;
}

int hog(long mebibytes) {
  std::vector<char*> blocks;
  for (long i = 0; i < mebibytes; ++i) {
    char* block = static_cast<char*>(std::malloc(1 << 20));
    if (block == nullptr) {
      put("hog", "ENOMEM");
      return 1;
    }
    std::memset(block, static_cast<int>(i), 1 << 20);
    blocks.push_back(block);
  }
  put("allocated_mib", std::to_string(blocks.size()));
  return 0;
}

double clock_ms(clockid_t clock) {
  timespec now{};
  ::clock_gettime(clock, &now);
  return static_cast<double>(now.tv_sec) * 1000.0 + static_cast<double>(now.tv_nsec) / 1e6;
}

int spin(double seconds) {
  const double start = clock_ms(CLOCK_MONOTONIC);
  volatile unsigned long counter = 0;
  while (clock_ms(CLOCK_MONOTONIC) - start < seconds * 1000.0) {
    for (int i = 0; i < 100000; ++i)
      counter = counter + 1;
  }
  put("cpu_ms", std::to_string(clock_ms(CLOCK_PROCESS_CPUTIME_ID)));
  put("wall_ms", std::to_string(clock_ms(CLOCK_MONOTONIC) - start));
  return 0;
}

int forkbomb() {
  const pid_t first = ::getpid();
  for (int i = 0; i < 64; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) continue;  // the child forks too
    if (pid < 0) {
      if (::getpid() == first) {
        put("fork_error", errno_name(errno));
        return 1;
      }
      break;
    }
  }
  if (::getpid() == first) return 0;
  ::pause();  // killed with the sandbox
  ::_exit(0);
}

// "ok" or the errno name; a created socket is closed at once.
std::string try_socket(unsigned long family, int* kept = nullptr) {
  const long fd = ::syscall(SYS_socket, family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno_name(errno);
  if (kept != nullptr) {
    *kept = static_cast<int>(fd);
  } else {
    ::close(static_cast<int>(fd));
  }
  return "ok";
}

int socket_family(unsigned long family, long vsock_port) {
  // socket()'s family is an int: the kernel ignores the upper half of the
  // register, so a filter that compares all 64 bits can be walked around.
  const unsigned long high_bits = family | (1UL << 32);
  int fd = -1;
  put("socket", try_socket(family, &fd));
  int high_fd = -1;
  put("socket_high_bits", try_socket(high_bits, &high_fd));
  int pair[2] = {-1, -1};
  put("socketpair", ::syscall(SYS_socketpair, family, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0
                        ? "ok"
                        : errno_name(errno));
  for (int end : pair) {
    if (end >= 0) ::close(end);
  }
  if (vsock_port > 0 && family == AF_VSOCK) {
    for (auto [key, socket_fd] : {std::pair<const char*, int*>{"bind", &fd},
                                  std::pair<const char*, int*>{"bind_high_bits", &high_fd}}) {
      if (*socket_fd < 0) {
        put(key, "no socket");
        continue;
      }
      sockaddr_vm address{};
      address.svm_family = AF_VSOCK;
      address.svm_cid = VMADDR_CID_ANY;
      address.svm_port = static_cast<unsigned>(vsock_port);
      put(key, ::bind(*socket_fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0
                   ? "ok"
                   : errno_name(errno));
      ::close(*socket_fd);
      *socket_fd = -1;
    }
  }
  if (fd >= 0) ::close(fd);
  if (high_fd >= 0) ::close(high_fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "report") return report(argc, argv);
  if (command == "daemon" && argc == 3) return daemonize(argv[2]);
  if (command == "sleep" && argc == 4) {
    ::sleep(static_cast<unsigned>(std::atoi(argv[3])));
    return 0;
  }
  if (command == "forks" && argc == 3) return forks(std::atoi(argv[2]));
  if (command == "loopback") return loopback();
  if (command == "syscalls") return syscalls();
  if (command == "int80") return int80();
  if (command == "hog" && argc == 3) return hog(std::atol(argv[2]));
  if (command == "spin" && argc == 3) return spin(std::atof(argv[2]));
  if (command == "forkbomb") return forkbomb();
  if (command == "socket-family" && (argc == 3 || argc == 4)) {
    return socket_family(std::strtoul(argv[2], nullptr, 10),
                         argc == 4 ? std::strtol(argv[3], nullptr, 10) : 0);
  }
  if (command == "write" && argc == 4) {
    const int fd = ::open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    put("write", fd < 0 ? errno_name(errno) : "ok");
    if (fd >= 0) {
      (void)!::write(fd, argv[3], std::strlen(argv[3]));
      ::close(fd);
    }
    return 0;
  }
  std::fprintf(stderr, "usage: probe report|daemon|sleep|forks|loopback|write|socket-family ...\n");
  return 2;
}
