// The compiled kernels of core/portable/network/kernels.c as an importable shared library of this package: pip
// builds it at install time where a C compiler exists (setup.py; optional), with the kernels compiled
// once per instruction set of the architecture, each copy's functions named after it
// (pk_linear_f32_avx2, ...). Python calls the kernels through ctypes: core/native.py loads the same
// file, asks which sets were compiled (pk_sets) and which this processor has (pk_supports), and binds
// the pk_* functions of the best through core/portable/network/kernels.py, which checks every array before
// handing over a pointer; pk_linear_i8_shared runs one of the chosen set's int8 products on two
// threads, the caller's and one of its own, and pk_linear_i8_two two at once, one on each. As a
// module it has one function, `address`, the pointer of an array so checked.
#include <Python.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
// The feature bits of the kernel's auxiliary vector, where the C library's headers predate them.
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

#define EXPORT __attribute__((visibility("default")))

// The sets compiled in, best first, comma-separated ("avx512,avx2,baseline").
EXPORT const char *pk_sets(void) { return PK_SETS; }

#if defined(__aarch64__) && defined(__APPLE__)
// A feature macOS reports (hw.optional.arm.FEAT_*: 1 where present; absent on older systems).
static int apple_feature(const char *name) {
  int present = 0;
  size_t size = sizeof present;
  return sysctlbyname(name, &present, &size, NULL, 0) == 0 && present == 1;
}
#endif

// Whether this processor (and its operating system, which must save the wider registers) runs `set`.
EXPORT int pk_supports(const char *set) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (strcmp(set, "avx512") == 0)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (strcmp(set, "avxvnni") == 0)
    return __builtin_cpu_supports("avxvnni") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (strcmp(set, "avx2") == 0) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
#if defined(__aarch64__) && defined(__linux__)
  int dotprod = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
  if (strcmp(set, "i8mm") == 0) return dotprod && (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0;
  if (strcmp(set, "dotprod") == 0) return dotprod;
#elif defined(__aarch64__) && defined(__APPLE__)
  int dotprod = apple_feature("hw.optional.arm.FEAT_DotProd");
  if (strcmp(set, "i8mm") == 0) return dotprod && apple_feature("hw.optional.arm.FEAT_I8MM");
  if (strcmp(set, "dotprod") == 0) return dotprod;
#endif
  return strcmp(set, "baseline") == 0;
}

// The address of a contiguous buffer's first byte (a NumPy array's data pointer, its offset
// included): what core/portable/network/kernels.py hands a kernel once it has checked the array, in a
// tenth of the time of NumPy's __array_interface__, which builds a dict for it.
static PyObject *address(PyObject *module, PyObject *array) {
  Py_buffer view;
  if (PyObject_GetBuffer(array, &view, PyBUF_ANY_CONTIGUOUS) < 0) return NULL;
  void *start = view.buf;
  PyBuffer_Release(&view);
  return PyLong_FromVoidPtr(start);
}

// Work on two threads at once, the caller's and a helper of this library's: an int8 product shared
// by both (a text prompt's, core/native.py), or two products, one each (halves of many rows), handed
// over in microseconds where a Python thread pool took 0.1-0.4 ms a product (its wake-up, the GIL,
// the Python around the call). The helper is started at the first call; after each job it waits for
// the next for HELPER_SPIN_NS, giving the core to any other thread that wants it, then sleeps until
// woken. A prompt's split products come up to about 1.5 ms apart (attention and the 1024x1024
// product, which stays whole, between them); waking a sleeping helper costs more than that wait on a
// virtual machine, whose idle second core must be scheduled again. english int8, AVX2, the API's
// streams alternating in two processes (12 rounds, medians), waiting 2 ms against 0.3: first chunk
// of a short text 34.7 ms against 41.6, of a medium one 70.0 against 71.3 (0.91 paired), the
// real-time factor the same. One caller at a time has the helper: a second caller, or one where no
// thread could be started, runs the whole job itself.
typedef void (*job_fn)(void *, int);  // a job's part for thread 0 (the caller's) or 1 (the helper's)

#define HELPER_SPIN_NS 2000000
enum { JOB_NONE, JOB_POSTED, JOB_TAKEN };

static job_fn helper_job;
static void *helper_arg;
static atomic_int helper_state;  // JOB_POSTED from a job's posting until the helper takes it (or the caller takes it back)
static atomic_int helper_taken;  // 1 while a caller has the helper
static int helper_started, helper_sleeping, forks_watched;
static pthread_mutex_t helper_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t helper_wake = PTHREAD_COND_INITIALIZER;

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void *helper(void *unused) {
  (void)unused;
  for (;;) {
    long long until = now_ns() + HELPER_SPIN_NS;
    while (atomic_load_explicit(&helper_state, memory_order_acquire) != JOB_POSTED && now_ns() < until) sched_yield();
    pthread_mutex_lock(&helper_mutex);
    helper_sleeping = 1;
    while (atomic_load_explicit(&helper_state, memory_order_acquire) != JOB_POSTED)
      pthread_cond_wait(&helper_wake, &helper_mutex);
    helper_sleeping = 0;
    pthread_mutex_unlock(&helper_mutex);
    int posted = JOB_POSTED;
    if (atomic_compare_exchange_strong(&helper_state, &posted, JOB_TAKEN)) {
      helper_job(helper_arg, 1);
      atomic_store_explicit(&helper_state, JOB_NONE, memory_order_release);
    }
  }
  return NULL;
}

// A child of fork() has none of its parent's threads: it starts its own helper when it needs one.
static void helper_forgotten(void) {
  helper_started = helper_sleeping = 0;
  atomic_store(&helper_state, JOB_NONE);
  atomic_store(&helper_taken, 0);
  pthread_mutex_init(&helper_mutex, NULL);
  pthread_cond_init(&helper_wake, NULL);
}

// The helper started (detached), and forks watched: 0 where no thread could be started.
static int start_helper(void) {
  pthread_t thread;
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  helper_started = pthread_create(&thread, &attributes, helper, NULL) == 0;
  pthread_attr_destroy(&attributes);
  if (helper_started && !forks_watched) forks_watched = pthread_atfork(NULL, NULL, helper_forgotten) == 0;
  return helper_started;
}

// job(arg, 0) on the caller's thread and job(arg, 1) on the helper's; where the helper has not taken
// its part by the time the caller is done with its own (asleep, its core elsewhere), the caller takes
// it back and runs it too.
static void on_two_threads(job_fn job, void *arg) {
  int free_ = 0;
  if (atomic_compare_exchange_strong(&helper_taken, &free_, 1)) {
    if (helper_started || start_helper()) {
      helper_job = job;
      helper_arg = arg;
      atomic_store_explicit(&helper_state, JOB_POSTED, memory_order_release);
      pthread_mutex_lock(&helper_mutex);
      if (helper_sleeping) pthread_cond_signal(&helper_wake);
      pthread_mutex_unlock(&helper_mutex);
      job(arg, 0);
      int posted = JOB_POSTED;
      if (atomic_compare_exchange_strong(&helper_state, &posted, JOB_NONE))
        job(arg, 1);
      else
        while (atomic_load_explicit(&helper_state, memory_order_acquire) != JOB_NONE) sched_yield();
      atomic_store(&helper_taken, 0);
      return;
    }
    atomic_store(&helper_taken, 0);
  }
  job(arg, 0);
  job(arg, 1);
}

// An int8 product shared by the two threads: each takes the next unit of rows to quantize and pack
// (pk_i8_rows) until none is left, waits for the other's last, then takes the next panel of the
// weight's rows (pk_i8_panel) until none is left. Every output is made as the whole product makes it
// (the same integers, then the same float32 operations), whichever thread makes it; a thread that
// starts late, or is descheduled, leaves more of the work to the other, where fixed halves made the
// product wait for it.
typedef int (*i8_rows_fn)(const float *, int, int, int, uint8_t *, int);
typedef int (*i8_panel_fn)(const int8_t *, const float *, const int32_t *, const float *, float *, int, int, int, int,
                           uint8_t *, int, int);

// An int8 product's arguments, pk_linear_i8's.
struct i8_product {
  const float *X, *S, *bias;
  const int8_t *Q;
  const int32_t *sums;
  float *Y;
  int M, N, K, G;
  uint8_t *scratch;
};

struct shared_i8 {
  i8_rows_fn rows;
  i8_panel_fn panel;
  struct i8_product a;
  int units, panels;
  atomic_int next_unit, units_made, next_panel;
};

static void share_i8(void *arg, int thread) {
  struct shared_i8 *s = arg;
  const struct i8_product *a = &s->a;
  for (int u; (u = atomic_fetch_add(&s->next_unit, 1)) < s->units;) {
    s->rows(a->X, a->M, a->K, a->G, a->scratch, u);
    atomic_fetch_add_explicit(&s->units_made, 1, memory_order_release);
  }
  while (atomic_load_explicit(&s->units_made, memory_order_acquire) < s->units) sched_yield();
  for (int p; (p = atomic_fetch_add(&s->next_panel, 1)) < s->panels;)
    s->panel(a->Q, a->S, a->sums, a->bias, a->Y, a->M, a->N, a->K, a->G, a->scratch, p, thread);
}

// pk_linear_i8 of the chosen instruction set, on two threads: `rows` and `panel` are that set's
// pk_i8_rows and pk_i8_panel, the other arguments pk_linear_i8's, checked by
// core/portable/network/kernels.py's binding.
EXPORT void pk_linear_i8_shared(i8_rows_fn rows, i8_panel_fn panel, const float *X, const int8_t *Q, const float *S,
                                const int32_t *sums, const float *bias, float *Y, int M, int N, int K, int G,
                                uint8_t *scratch) {
  struct shared_i8 s = {rows, panel, {X, S, bias, Q, sums, Y, M, N, K, G, scratch}, 0, 0, 0, 0, 0};
  s.units = rows(X, M, K, G, scratch, -1);
  s.panels = panel(Q, S, sums, bias, Y, M, N, K, G, scratch, -1, 0);
  on_two_threads(share_i8, &s);
}

// Two int8 products, one on each thread: `fn` is the chosen instruction set's pk_linear_i8, each
// product's arguments its own, checked by core/portable/network/kernels.py's binding.
typedef void (*linear_i8_fn)(const float *, const int8_t *, const float *, const int32_t *, const float *, float *,
                             int, int, int, int, uint8_t *);

struct linear_i8_call {
  linear_i8_fn fn;
  struct i8_product a;
};

static void run_call(void *arg, int thread) {
  const struct linear_i8_call *c = (const struct linear_i8_call *)arg + thread;
  const struct i8_product *a = &c->a;
  c->fn(a->X, a->Q, a->S, a->sums, a->bias, a->Y, a->M, a->N, a->K, a->G, a->scratch);
}

EXPORT void pk_linear_i8_two(linear_i8_fn fn, const float *X0, const int8_t *Q0, const float *S0, const int32_t *sums0,
                             const float *bias0, float *Y0, int M0, int N0, int K0, int G0, uint8_t *scratch0,
                             const float *X1, const int8_t *Q1, const float *S1, const int32_t *sums1,
                             const float *bias1, float *Y1, int M1, int N1, int K1, int G1, uint8_t *scratch1) {
  struct linear_i8_call calls[2] = {{fn, {X0, S0, bias0, Q0, sums0, Y0, M0, N0, K0, G0, scratch0}},
                                    {fn, {X1, S1, bias1, Q1, sums1, Y1, M1, N1, K1, G1, scratch1}}};
  on_two_threads(run_call, calls);
}

static PyMethodDef kernels_methods[] = {
    {"address", address, METH_O, "The address of a contiguous buffer's first byte."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef kernels_module = {PyModuleDef_HEAD_INIT, "_kernels",
                                            "core/portable/network/kernels.c, compiled per instruction set (see core/native.py)",
                                            -1, kernels_methods};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&kernels_module); }
