// Publishing one trace's code bytes on Linux without protection keys: every path the kernel
// offers, timed against the kit's default (one pwrite into the memfd behind the code's RX
// view). Quoted by code_file.rs's module docs (wave 37), which say what each path does to
// the write invariant; not built by cargo.
//
//   gcc -O2 -o /tmp/publish_paths runtime/src/memory/publish_paths.c -lpthread
//   /tmp/publish_paths 11            # 11 rounds; every mode once per round, order rotated
//   PEER=1 /tmp/publish_paths 11     # a second thread of the process spinning meanwhile
//   LEN=64 /tmp/publish_paths 11 io  # a trace length; only modes named with "io" (and pwrite)
//
// Thread CPU per write (median [min-max]), process CPU (io_uring's workers count there),
// wall, and the median [min-max] of the per-round ratios to pwrite. Run as root for the
// huge-page tmpfs mode (it mounts one, detached at once); modes the kernel refuses say why.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/aio_abi.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE 0x80
#endif
#define PG 4096
#define NPAGES 200
static size_t LEN = 300;
static char buf[PG] __attribute__((aligned(PG)));
static double tcpu() { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static double pcpu() { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static double wall() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static void die(const char *w) { perror(w); exit(1); }
static int mkmemfd(unsigned flags, size_t size) {
  int fd = memfd_create("code", flags); if (fd < 0) die("memfd_create");
  if (ftruncate(fd, size)) die("ftruncate");
  for (int i = 0; i < NPAGES; i++) if (pwrite(fd, buf, PG, (off_t)i * PG) != PG) die("prefill");
  return fd;
}
static char *maprx(int fd, size_t size) { char *p = mmap(0, size, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0); if (p == MAP_FAILED) die("mmap rx"); return p; }

// ---- modes
static int fd_memfd, fd_big, fd_sealed, fd_noatime, fd_shm, fd_huge, fd_direct, fd_pm, fd_hole, uffd, fd_uffd;
static char *priv, *fresh, *rxpriv, *uffd_rx;
static int op_pwrite(long i) { return pwrite(fd_memfd, buf, LEN, (i % NPAGES) * PG) == (ssize_t)LEN; }
static int op_raw(long i) { return syscall(SYS_pwrite64, fd_memfd, buf, LEN, (i % NPAGES) * PG) == (long)LEN; }
static int op_page(long i) { return pwrite(fd_memfd, buf, PG, (i % NPAGES) * PG) == PG; }
static int op_64(long i) { return pwrite(fd_memfd, buf, 64, (i % NPAGES) * PG) == 64; }
static int op_samepage(long i) { (void)i; return pwrite(fd_memfd, buf, LEN, 0) == (ssize_t)LEN; }
static int pv2(long i, int flags) { struct iovec v = {buf, LEN}; return pwritev2(fd_memfd, &v, 1, (i % NPAGES) * PG, flags) == (ssize_t)LEN; }
static int op_pwritev2_0(long i) { return pv2(i, 0); }
static int op_hipri(long i) { return pv2(i, RWF_HIPRI); }
static int op_nowait(long i) { return pv2(i, RWF_NOWAIT); }
static int op_dontcache(long i) { return pv2(i, RWF_DONTCACHE); }
static int op_dsync(long i) { return pv2(i, RWF_DSYNC); }
static int op_big(long i) { return pwrite(fd_big, buf, LEN, (i % NPAGES) * PG) == (ssize_t)LEN; }
static int op_sealed(long i) { return pwrite(fd_sealed, buf, LEN, (i % NPAGES) * PG) == (ssize_t)LEN; }
static int op_noatime(long i) { return pwrite(fd_noatime, buf, LEN, (i % NPAGES) * PG) == (ssize_t)LEN; }
static int op_shm(long i) { return pwrite(fd_shm, buf, LEN, (i % NPAGES) * PG) == (ssize_t)LEN; }
static int op_huge(long i) { if (fd_huge < 0) { errno = ENODEV; return 0; } return pwrite(fd_huge, buf, LEN, (i % NPAGES) * PG) == (ssize_t)LEN; }
static int op_direct(long i) { return pwrite(fd_direct, buf, PG, (i % NPAGES) * PG) == PG; }
static int op_getppid(long i) { (void)i; return syscall(SYS_getppid) > 0; }
static int op_memcpy(long i) { static char dst[NPAGES * PG]; memcpy(dst + (i % NPAGES) * PG, buf, LEN); __asm__ volatile("" ::: "memory"); return 1; }
// Private code page flipped RW -> write -> RX: two calls (other threads executing there would fault).
static int op_mprot2(long i) {
  char *p = priv + (i % NPAGES) * PG;
  if (mprotect(p, PG, PROT_READ | PROT_WRITE)) return 0;
  memcpy(p, buf, LEN);
  return mprotect(p, PG, PROT_READ | PROT_EXEC) == 0;
}
// A fresh private RW page per trace, made RX once written (one call); every NPAGES the pool is made RW again.
static int op_fresh(long i) {
  long k = i % NPAGES;
  if (k == 0 && mprotect(fresh, NPAGES * PG, PROT_READ | PROT_WRITE)) return 0;
  memcpy(fresh + k * PG, buf, LEN);
  return mprotect(fresh + k * PG, PG, PROT_READ | PROT_EXEC) == 0;
}
static int op_procmem(long i) { return pwrite(fd_pm, buf, LEN, (off_t)(uintptr_t)(rxpriv + (i % NPAGES) * PG)) == (ssize_t)LEN; }
static int op_pvw(long i) {
  struct iovec l = {buf, LEN}, r = {rxpriv + (i % NPAGES) * PG, LEN};
  return process_vm_writev(getpid(), &l, 1, &r, 1, 0) == (ssize_t)LEN;
}
// ---- io_uring, synchronous: submit one write and wait for it in the same io_uring_enter.
static struct { int fd; unsigned *sq_tail, *sq_mask, *cq_head, *cq_tail, *cq_mask; struct io_uring_sqe *sqes; struct io_uring_cqe *cqes; unsigned *sq_array; } R[3];
static int ring_setup(int k, unsigned flags, int fixed) {
  struct io_uring_params p; memset(&p, 0, sizeof p); p.flags = flags;
  int fd = syscall(SYS_io_uring_setup, 8, &p); if (fd < 0) return -errno;
  size_t sqsz = p.sq_off.array + p.sq_entries * sizeof(unsigned), cqsz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
  size_t sz = sqsz > cqsz ? sqsz : cqsz;
  char *sq = mmap(0, sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING); if (sq == MAP_FAILED) die("sq");
  struct io_uring_sqe *sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
  R[k].fd = fd; R[k].sq_tail = (unsigned *)(sq + p.sq_off.tail); R[k].sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
  R[k].sq_array = (unsigned *)(sq + p.sq_off.array); R[k].cq_head = (unsigned *)(sq + p.cq_off.head); R[k].cq_tail = (unsigned *)(sq + p.cq_off.tail);
  R[k].cq_mask = (unsigned *)(sq + p.cq_off.ring_mask); R[k].cqes = (struct io_uring_cqe *)(sq + p.cq_off.cqes); R[k].sqes = sqes;
  for (unsigned j = 0; j < p.sq_entries; j++) R[k].sq_array[j] = j;
  if (fixed) {
    if (syscall(SYS_io_uring_register, fd, IORING_REGISTER_FILES, &fd_memfd, 1)) die("reg files");
    struct iovec v = {buf, PG}; if (syscall(SYS_io_uring_register, fd, IORING_REGISTER_BUFFERS, &v, 1)) die("reg bufs");
  }
  return 0;
}
static int ring_write(int k, long i, int fixed) {
  unsigned t = *R[k].sq_tail; struct io_uring_sqe *s = &R[k].sqes[t & *R[k].sq_mask]; memset(s, 0, sizeof *s);
  s->opcode = fixed ? IORING_OP_WRITE_FIXED : IORING_OP_WRITE; s->fd = fixed ? 0 : fd_memfd; s->addr = (uintptr_t)buf; s->len = LEN; s->off = (i % NPAGES) * PG;
  if (fixed) { s->flags = IOSQE_FIXED_FILE; s->buf_index = 0; }
  __atomic_store_n(R[k].sq_tail, t + 1, __ATOMIC_RELEASE);
  if (syscall(SYS_io_uring_enter, R[k].fd, 1, 1, IORING_ENTER_GETEVENTS, 0, 0) != 1) return 0;
  unsigned h = *R[k].cq_head; if (h == __atomic_load_n(R[k].cq_tail, __ATOMIC_ACQUIRE)) return 0;
  int res = R[k].cqes[h & *R[k].cq_mask].res; __atomic_store_n(R[k].cq_head, h + 1, __ATOMIC_RELEASE);
  if (res != (int)LEN) { errno = -res; return 0; }
  return 1;
}
static int op_uring(long i) { return ring_write(0, i, 0); }
static int op_uring_fixed(long i) { return ring_write(1, i, 1); }
static int op_uring_defer(long i) { return ring_write(2, i, 1); }
// ---- a trace that starts a fresh page: pwrite into a hole vs UFFDIO_COPY of the page.
#define NHOLE 20000
static int op_hole(long i) { return pwrite(fd_hole, buf, LEN, (i % NHOLE) * PG) == (ssize_t)LEN; }
static int op_uffd(long i) {
  struct uffdio_copy c = {.dst = (uintptr_t)(uffd_rx + (i % NHOLE) * PG), .src = (uintptr_t)buf, .len = PG, .mode = UFFDIO_COPY_MODE_DONTWAKE};
  return ioctl(uffd, UFFDIO_COPY, &c) == 0 && c.copy == PG;
}
static void hole_reset(void) {
  if (fallocate(fd_hole, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)NHOLE * PG)) die("punch");
  if (fallocate(fd_uffd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)NHOLE * PG)) die("punch u");
}

// ---- Linux AIO: io_submit runs a buffered write synchronously; the completion is read from the
// user-space ring (no io_getevents call).
static aio_context_t aioctx;
struct aio_ring { unsigned id, nr, head, tail, magic, compat, incompat, header_length; struct io_event io_events[]; };
static int op_aio(long i) {
  struct iocb cb; memset(&cb, 0, sizeof cb); cb.aio_fildes = fd_memfd; cb.aio_lio_opcode = IOCB_CMD_PWRITE;
  cb.aio_buf = (uintptr_t)buf; cb.aio_nbytes = LEN; cb.aio_offset = (i % NPAGES) * PG; struct iocb *l[1] = {&cb};
  if (syscall(SYS_io_submit, aioctx, 1, l) != 1) return 0;
  struct aio_ring *r = (struct aio_ring *)aioctx; unsigned h = r->head;
  if (h == __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE)) { struct io_event ev; if (syscall(SYS_io_getevents, aioctx, 1, 1, &ev, 0) != 1) return 0; return ev.res == (long)LEN; }
  long res = r->io_events[h % r->nr].res; __atomic_store_n(&r->head, (h + 1) % r->nr, __ATOMIC_RELEASE); return res == (long)LEN;
}
// ---- a fresh private page holding the page's code, made RX and moved over the code page
// (mremap MREMAP_FIXED), then a new staging page: three calls.
static char *mr_target;
static int op_mremap(long i) {
  char *st = mmap(0, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); if (st == MAP_FAILED) return 0;
  memcpy(st, buf, LEN);
  if (mprotect(st, PG, PROT_READ | PROT_EXEC)) return 0;
  return mremap(st, PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED, mr_target + (i % NPAGES) * PG) != MAP_FAILED;
}
// A peer thread of the process spinning on the other CPU (so that TLB flushes must reach it).
static volatile int peer_run; static volatile unsigned long peer_count;
static void *peer(void *a) { (void)a; while (peer_run) peer_count++; return 0; }

struct mode { const char *name; int (*op)(long); int n; int hole; int ok; double t[64], w[64], p[64], q[64]; };
static struct mode M[] = {
  {"pwrite LEN B (memfd, default)", op_pwrite, 100000},
  {"syscall(SYS_pwrite64)", op_raw, 100000},
  {"pwritev2 flags 0", op_pwritev2_0, 100000},
  {"pwritev2 RWF_HIPRI", op_hipri, 100000},
  {"pwritev2 RWF_NOWAIT", op_nowait, 100000},
  {"pwritev2 RWF_DONTCACHE", op_dontcache, 100000},
  {"pwritev2 RWF_DSYNC", op_dsync, 100000},
  {"pwrite, one page always", op_samepage, 100000},
  {"pwrite 64 B", op_64, 100000},
  {"pwrite 4096 B (whole page)", op_page, 100000},
  {"memfd 1 GiB long", op_big, 100000},
  {"memfd sealed (shrink+grow)", op_sealed, 100000},
  {"memfd O_NOATIME", op_noatime, 100000},
  {"tmpfs file (/dev/shm)", op_shm, 100000},
  {"tmpfs huge=always file", op_huge, 100000},
  {"memfd O_DIRECT (4096 B)", op_direct, 100000},
  {"io_uring WRITE, enter(1,1)", op_uring, 100000},
  {"io_uring WRITE_FIXED+fixed file", op_uring_fixed, 100000},
  {"io_uring fixed, DEFER_TASKRUN", op_uring_defer, 100000},
  {"aio io_submit (ring reaped)", op_aio, 100000},
  {"mmap+copy+mprotect RX+mremap over", op_mremap, 50000},
  {"mprotect RW,copy,RX (private)", op_mprot2, 50000},
  {"fresh private page, mprotect RX", op_fresh, 50000},
  {"/proc/self/mem (private RX)", op_procmem, 100000},
  {"process_vm_writev (private RX)", op_pvw, 100000},
  {"pwrite into a hole", op_hole, NHOLE, 1},
  {"UFFDIO_COPY 4 KiB (missing page)", op_uffd, NHOLE, 1},
  {"getppid (bare system call)", op_getppid, 100000},
  {"memcpy of LEN B", op_memcpy, 100000},
};
#define NM (int)(sizeof M / sizeof M[0])
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
static double med(double *v, int n, double *lo, double *hi) { double s[64]; memcpy(s, v, n * sizeof *v); qsort(s, n, sizeof *s, cmp); *lo = s[0]; *hi = s[n - 1]; return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; }

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 9; const char *only = argc > 2 ? argv[2] : 0; int withpeer = getenv("PEER") != 0;
  if (getenv("LEN")) LEN = atoi(getenv("LEN"));
  memset(buf, 0xc3, sizeof buf);
  fd_memfd = mkmemfd(MFD_CLOEXEC, 1 << 20); maprx(fd_memfd, 1 << 20);
  fd_big = mkmemfd(MFD_CLOEXEC, 1ul << 30); maprx(fd_big, 1 << 20);
  fd_sealed = mkmemfd(MFD_CLOEXEC | MFD_ALLOW_SEALING, 1 << 20); maprx(fd_sealed, 1 << 20);
  if (fcntl(fd_sealed, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW)) die("seal");
  fd_noatime = mkmemfd(MFD_CLOEXEC, 1 << 20); maprx(fd_noatime, 1 << 20);
  if (fcntl(fd_noatime, F_SETFL, O_NOATIME)) die("noatime");
  fd_shm = open("/dev/shm/publish-paths", O_RDWR | O_CREAT | O_TRUNC, 0600); unlink("/dev/shm/publish-paths");
  if (fd_shm < 0 || ftruncate(fd_shm, 1 << 20)) die("shm");
  for (int i = 0; i < NPAGES; i++) pwrite(fd_shm, buf, PG, i * PG);
  maprx(fd_shm, 1 << 20);
  // A tmpfs mounted huge=always, its file's pages one 2 MiB folio (the mount is private to
  // this run: detached once the file is open).
  char dir[] = "/tmp/publish-paths-XXXXXX";
  fd_huge = -1;
  if (mkdtemp(dir) && mount("none", dir, "tmpfs", 0, "huge=always,size=64m") == 0) {
    char f[64]; snprintf(f, sizeof f, "%s/f", dir);
    fd_huge = open(f, O_RDWR | O_CREAT | O_TRUNC, 0600); unlink(f); umount2(dir, MNT_DETACH);
  } else fprintf(stderr, "tmpfs huge=always: %s (not root?)\n", strerror(errno));
  rmdir(dir);
  if (fd_huge >= 0) {
    if (ftruncate(fd_huge, 4 << 20)) die("huge");
    for (int i = 0; i < NPAGES; i++) pwrite(fd_huge, buf, PG, i * PG);
    maprx(fd_huge, 4 << 20);
  }
  { char path[64]; snprintf(path, sizeof path, "/proc/self/fd/%d", fd_memfd); fd_direct = open(path, O_RDWR | O_DIRECT); if (fd_direct < 0) fprintf(stderr, "O_DIRECT: %s\n", strerror(errno)); }
  priv = mmap(0, NPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); memset(priv, 0xc3, NPAGES * PG); mprotect(priv, NPAGES * PG, PROT_READ | PROT_EXEC);
  fresh = mmap(0, NPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); memset(fresh, 0xc3, NPAGES * PG);
  rxpriv = mmap(0, NPAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); memset(rxpriv, 0xc3, NPAGES * PG); mprotect(rxpriv, NPAGES * PG, PROT_READ | PROT_EXEC);
  fd_pm = open("/proc/self/mem", O_RDWR);
  if (syscall(SYS_io_setup, 8, &aioctx)) die("io_setup");
  mr_target = mmap(0, NPAGES * PG, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  int e;
  if ((e = ring_setup(0, 0, 0))) fprintf(stderr, "ring0: %s\n", strerror(-e));
  if ((e = ring_setup(1, 0, 1))) fprintf(stderr, "ring1: %s\n", strerror(-e));
  if ((e = ring_setup(2, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN, 1))) fprintf(stderr, "ring2: %s\n", strerror(-e));
  fd_hole = memfd_create("hole", MFD_CLOEXEC); ftruncate(fd_hole, (off_t)NHOLE * PG); maprx(fd_hole, (size_t)NHOLE * PG);
  fd_uffd = memfd_create("uffd", MFD_CLOEXEC); ftruncate(fd_uffd, (off_t)NHOLE * PG); uffd_rx = maprx(fd_uffd, (size_t)NHOLE * PG);
  uffd = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
  if (uffd < 0) fprintf(stderr, "userfaultfd: %s\n", strerror(errno));
  else {
    struct uffdio_api api = {.api = UFFD_API}; if (ioctl(uffd, UFFDIO_API, &api)) die("uffd api");
    struct uffdio_register reg = {.range = {(uintptr_t)uffd_rx, (size_t)NHOLE * PG}, .mode = UFFDIO_REGISTER_MODE_MISSING};
    if (ioctl(uffd, UFFDIO_REGISTER, &reg)) fprintf(stderr, "uffd register: %s\n", strerror(errno));
  }
  pthread_t th; if (withpeer) { peer_run = 1; pthread_create(&th, 0, peer, 0); }
  // Warm-up and which modes work.
  for (int m = 0; m < NM; m++) {
    if (only && !strstr(M[m].name, only) && !strstr(M[m].name, "default")) { M[m].ok = -1; continue; }
    errno = 0; M[m].ok = M[m].op(0); if (!M[m].ok) printf("%-34s refused: %s\n", M[m].name, strerror(errno));
    if (M[m].hole) hole_reset();
  }
  for (int r = 0; r < rounds; r++)
    for (int k = 0; k < NM; k++) {
      int m = (k + r) % NM; if (M[m].ok != 1) continue;
      if (M[m].hole) hole_reset();
      unsigned long c0 = peer_count; double t0 = tcpu(), p0 = pcpu(), w0 = wall();
      for (long i = 0; i < M[m].n; i++) if (!M[m].op(i)) { fprintf(stderr, "%s failed at %ld: %s\n", M[m].name, i, strerror(errno)); exit(1); }
      M[m].t[r] = (tcpu() - t0) / M[m].n; M[m].p[r] = (pcpu() - p0) / M[m].n; M[m].w[r] = (wall() - w0) / M[m].n; M[m].q[r] = (peer_count - c0) / (M[m].w[r] * M[m].n);
    }
  if (withpeer) { peer_run = 0; pthread_join(th, 0); }
  printf("LEN %zu, %d rounds, modes alternated run by run%s; ns per write: thread CPU median [min-max], wall median, ratio to pwrite per round: median [min-max]\n", LEN, rounds, withpeer ? ", a peer thread spinning" : "");
  for (int m = 0; m < NM; m++) {
    if (M[m].ok != 1) continue;
    double lo, hi, wl, wh, rl, rh, ratio[64];
    for (int r = 0; r < rounds; r++) ratio[r] = M[m].t[r] / M[0].t[r];
    double t = med(M[m].t, rounds, &lo, &hi), w = med(M[m].w, rounds, &wl, &wh), rr = med(ratio, rounds, &rl, &rh), pl, ph, pc = med(M[m].p, rounds, &pl, &ph);
    double ql, qh, q = med(M[m].q, rounds, &ql, &qh);
    printf("%-34s %6.0f [%5.0f-%5.0f]  proc %6.0f  wall %6.0f   x%.2f [%.2f-%.2f]", M[m].name, t, lo, hi, pc, w, rr, rl, rh);
    if (withpeer) printf("  peer %.3f/ns", q);
    printf("\n");
  }
  int a = -1, b = -1; for (int m = 0; m < NM; m++) { if (strstr(M[m].name, "into a hole")) a = m; if (strstr(M[m].name, "UFFDIO")) b = m; }
  if (a >= 0 && b >= 0 && M[a].ok == 1 && M[b].ok == 1) { double ratio[64], rl, rh; for (int r = 0; r < rounds; r++) ratio[r] = M[b].t[r] / M[a].t[r]; double rr = med(ratio, rounds, &rl, &rh); printf("UFFDIO_COPY / pwrite into a hole, per round: %.3f [%.3f-%.3f]\n", rr, rl, rh); }
  return 0;
}
