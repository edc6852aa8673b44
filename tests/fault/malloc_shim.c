// LD_PRELOAD shim: fails one allocation of a whole program, counted from the start of its main(),
// for the tool's allocation-failure sweep (tests/tools/tool_faults_test.sh).
//   PINFEED_FAIL_ALLOCATION=K     the K-th call from main() on of malloc, calloc, realloc or the
//                                 aligned allocators returns no memory (ENOMEM); every other succeeds
//   PINFEED_COUNT_ALLOCATIONS=1   writes "allocations: N" (those from main() on) to stderr at exit
//   PINFEED_EXIT_RECORD=FILE      appends "exit N" to FILE when the program ends with _exit/_Exit
//   PINFEED_FAIL_BACKTRACE=1      writes the failed allocation's call stack to stderr, and the
//                                 stack of a crash (SIGSEGV, SIGBUS, SIGABRT) after it
// glibc's own allocator does the work (__libc_malloc and friends); free is glibc's. Allocations
// before main() (static constructors: the CUDA runtime's registration of a program's kernels,
// which does not check them) are not counted.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <execinfo.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);

static atomic_ullong calls;
static atomic_int armed;  // main() has begun
static unsigned long long fail_at;  // 0: none
static int report, trace;

static void crashed(int sig) {
  static const char line[] = "malloc_shim: the program crashed; its stack:\n";
  (void)!write(2, line, sizeof line - 1);
  void* frames[48];
  backtrace_symbols_fd(frames, backtrace(frames, 48), 2);
  raise(sig);
}

__attribute__((constructor)) static void shim_start(void) {
  const char* at = getenv("PINFEED_FAIL_ALLOCATION");
  if (at != NULL) fail_at = strtoull(at, NULL, 10);
  report = getenv("PINFEED_COUNT_ALLOCATIONS") != NULL;
  trace = getenv("PINFEED_FAIL_BACKTRACE") != NULL;
  if (trace) {  // the first call loads libgcc's unwinder, which allocates: before anything fails
    void* frames[2];
    (void)backtrace(frames, 2);
    struct sigaction sa;
    sa.sa_handler = crashed;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = (int)SA_RESETHAND;
    (void)sigaction(SIGSEGV, &sa, NULL);
    (void)sigaction(SIGBUS, &sa, NULL);
    (void)sigaction(SIGABRT, &sa, NULL);
  }
}

__attribute__((destructor)) static void shim_end(void) {
  if (!report) return;
  char text[48] = "allocations: ";
  char digits[24];
  int n = 0;
  unsigned long long v = atomic_load(&calls);
  do digits[n++] = (char)('0' + v % 10); while ((v /= 10) != 0);
  int at = 13;
  while (n > 0) text[at++] = digits[--n];
  text[at++] = '\n';
  (void)!write(2, text, (size_t)at);
}

typedef int (*main_fn)(int, char**, char**);
static main_fn real_main;
static int shim_main(int argc, char** argv, char** env) {
  atomic_store(&armed, 1);
  return real_main(argc, argv, env);
}

/// glibc's entry calls main() through this: counting begins there.
int __libc_start_main(main_fn main, int argc, char** argv, void (*init)(void), void (*fini)(void),
                      void (*rtld_fini)(void), void* stack_end) {
  typedef int (*start_fn)(main_fn, int, char**, void (*)(void), void (*)(void), void (*)(void), void*);
  const start_fn next = (start_fn)dlsym(RTLD_NEXT, "__libc_start_main");
  real_main = main;
  return next(shim_main, argc, argv, init, fini, rtld_fini, stack_end);
}

/// A program that ends with _exit or _Exit (no destructors) is counted too. With
/// PINFEED_EXIT_RECORD=FILE, the status it asks for is appended to FILE ("exit N"), so that a
/// harness can tell the program's own status from what reached it.
void _exit(int status) {
  shim_end();
  const char* record = getenv("PINFEED_EXIT_RECORD");
  if (record != NULL) {
    const int fd = open(record, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      char line[24] = "exit ";
      int at = 5;
      unsigned v = (unsigned)status & 0xFFu;
      char digits[4];
      int n = 0;
      do digits[n++] = (char)('0' + v % 10); while ((v /= 10) != 0);
      while (n > 0) line[at++] = digits[--n];
      line[at++] = '\n';
      (void)!write(fd, line, (size_t)at);
      close(fd);
    }
  }
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}
void _Exit(int status) { _exit(status); }

static int fails(void) {
  if (!atomic_load(&armed)) return 0;
  const unsigned long long n = atomic_fetch_add(&calls, 1) + 1;
  if (fail_at != 0 && n == fail_at) {
    if (trace) {
      void* frames[48];
      backtrace_symbols_fd(frames, backtrace(frames, 48), 2);
    }
    errno = ENOMEM;
    return 1;
  }
  return 0;
}

void* malloc(size_t size) { return fails() ? NULL : __libc_malloc(size); }
void* calloc(size_t count, size_t size) { return fails() ? NULL : __libc_calloc(count, size); }
void* realloc(void* p, size_t size) { return fails() ? NULL : __libc_realloc(p, size); }
void* memalign(size_t alignment, size_t size) { return fails() ? NULL : __libc_memalign(alignment, size); }
void* aligned_alloc(size_t alignment, size_t size) { return fails() ? NULL : __libc_memalign(alignment, size); }
int posix_memalign(void** out, size_t alignment, size_t size) {
  if (fails()) return ENOMEM;
  void* p = __libc_memalign(alignment, size);
  if (p == NULL) return ENOMEM;
  *out = p;
  return 0;
}
