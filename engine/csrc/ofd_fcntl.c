/* SQLite's unix VFS calls fcntl() through its system-call table with C's
 * variadic signature, which Rust cannot define; this trampoline takes the
 * one argument every fcntl command SQLite issues passes (a pointer or an
 * int, both carried in a pointer-sized slot) and hands it to honker's lock
 * layer (core/src/ofd.rs). */
#include <stdarg.h>

int honker_ofd_fcntl_impl(int fd, int cmd, void *arg);

int honker_ofd_fcntl(int fd, int cmd, ...) {
  va_list ap;
  void *arg;
  va_start(ap, cmd);
  arg = va_arg(ap, void *);
  va_end(ap);
  return honker_ofd_fcntl_impl(fd, cmd, arg);
}
